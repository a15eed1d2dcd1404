// What the SVM does to features before and after the solver, so that its predictions equal
// scikit-learn's StandardScaler + SVC on all features: standardisation, gamma resolution, the
// mask of features constant over the training set, and the correction of decision values
// for inputs that differ from the training set in a dropped feature. svm::Classifier
// (classifier.h) prepares its training rows with prepare_training_rows, which fuses the
// steps; the tests check it against the steps one at a time (gamma_scale and the mask's
// own definitions are in tests/support/preprocess_reference.h) and each step against its
// definition.
//
// Why the details are as they are is in docs/SVM.md; in short:
//  * scaling reproduces StandardScaler on float32 input bit for bit in intent: mean/var in
//    double (corrected two-pass), scale 1 for (near-)constant features by sklearn's own
//    test, x' = f32(f32(x − mean) / scale);
//  * every multiply-add of these sums is a written-out fused one (std::fma), the same with
//    any compiler's contraction and on the GPU (prepare_training_rows_gpu's twin kernels);
//  * gamma 'scale' = 1 / (D · Var(X')) over all N·D entries of the scaled matrix, D counting
//    every feature (also the constant ones), which is exactly SVC's number on that matrix;
//  * features constant over the scaled training set are dropped before the kernel: they
//    add nothing to any training distance. An input whose dropped feature f differs from the
//    training value v_f adds Σ (x'_f − v_f)² to its distance to every support vector — a
//    common factor exp(−γ e) on its rbf kernel values, applied after the fact
//    (correct_for_dropped_features), so predictions equal an SVM on all D features.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/half.h"
#include "kernels/svm/svm.h"

namespace svm {

// Unscaled training rows [n, dim] as the host holds them: float32, or float16 as a features
// file stores them (ae::FeatureSplit::X16), which a GPU fit uploads in half the bytes and
// widens on the device. Widening is exact, so either gives the same numbers.
struct RawRows {
  RawRows(const float* x) : f32(x) {}       // NOLINT(google-explicit-constructor): any float rows
  RawRows(const cae::Half* x) : f16(x) {}   // NOLINT(google-explicit-constructor)
  const float* f32 = nullptr;
  const cae::Half* f16 = nullptr;
};

struct Scaler {
  std::vector<double> mean, scale;  // [D]
};
// sklearn's StandardScaler; the same numbers for float16 rows as for their floats.
Scaler fit_standard_scaler(RawRows X, int64_t n, int dim);
Scaler identity_scaler(int dim);
void apply_scaler(const Scaler& s, float* X, int64_t n, int dim);

// A --gamma spec: "scale" (value 1), "<m>x" (m times scale, m > 0: kind scale, value m),
// "auto" (1/dim) or a number > 0 (kind number, value the number). Throws UsageError on
// anything else, so a spec can be checked before any data is read.
struct GammaSpec {
  enum class Kind { scale, auto_dim, number };
  Kind kind = Kind::scale;
  double value = 1.0;
};
GammaSpec parse_gamma_spec(const std::string& spec);
// The spec's number from the rows' gamma 'scale' (PreparedRows: the scaled training matrix, all
// features), taken once for many specs on one matrix.
double resolve_gamma(const GammaSpec& spec, double scale_value, int dim);

// The indices of the features a mask keeps, ascending.
std::vector<int> kept_columns(const std::vector<uint8_t>& keep);
// Moves the kept columns of each row to the front, in place, on every core; returns the
// kept count.
int compact_features(float* X, int64_t n, int dim, const std::vector<uint8_t>& keep);
// The end of the batch of rows compact_features moves at once after rows [0, r0) have moved
// (kept columns of dim, 0 < kept < dim): rows that overwrite no row still to be read.
int64_t compaction_batch_end(int64_t r0, int64_t n, int dim, int kept);
// The training rows made ready for the solver: standardised in place (or not), gamma
// 'scale' of the scaled rows, the mask of constant features with their values, and the kept
// columns moved to the front — the same numbers and bytes as fit_standard_scaler,
// apply_scaler, gamma_scale, constant_feature_mask and compact_features in turn
// (tests/support/preprocess_reference.h has the two that no tool runs alone), in two passes
// over X after the scaler's two instead of five.
struct PreparedRows {
  Scaler scaler;
  // 1 / (dim · Var) over all n·dim scaled entries (1 when Var is 0), as sklearn's
  // gamma='scale': all dim features count, also the constant ones.
  double gamma_scale = 1.0;
  std::vector<uint8_t> keep;         // [dim]
  std::vector<float> dropped_values;  // scaled row 0's value of each dropped feature
  int kept = 0;
};
PreparedRows prepare_training_rows(float* X, int64_t n, int dim, bool standardize);
// Its totals over the rows' sums (n of them), added in row order — also the GPU twin's: the
// mean of the n·dim scaled entries from each row's sum, and gamma 'scale' from each row's
// sum of squared deviations from that mean.
double mean_of_row_sums(const std::vector<double>& row_sum, int dim);
double gamma_scale_of_row_sums(const std::vector<double>& squared_row_sum, int dim);
// The same with the scaler already fitted on X (fit_standard_scaler, or identity_scaler):
// svm-fit fits it while the GPU's driver starts.
PreparedRows prepare_training_rows(float* X, int64_t n, int dim, Scaler scaler);
struct DeviceRows;  // rows on the GPU (kernels/svm/cuda/svm_gpu.cuh)
// The rest of it on the GPU, for a GPU fit, leaving X as it is: the rows go up once, and
// `out` gets what prepare_training_rows(X, n, dim, scaler) returns — gamma, mask, dropped
// values, kept count — bit for bit (each row's sums in the CPU's order). The scaled,
// compacted rows stay on the device, sorted by class for the solver (fit_gpu_prepared). Null,
// with `out` untouched, when the device lacks the room for the rows twice (then prepare on
// the host).
// float16 rows go up as they are and are widened on the device, with the same results.
std::shared_ptr<DeviceRows> prepare_training_rows_gpu(RawRows X, const int32_t* y, int64_t n, int dim,
                                                     const Scaler& scaler, PreparedRows& out);
// Rows rows[0..count) of X [·, dim] as prepare_training_rows leaves them — scaled, then
// their kept columns — into out [count, kept]: a GPU-prepared fit's support vectors.
void scaled_kept_rows(const PreparedRows& prepared, RawRows X, int dim, const int64_t* rows, int64_t count,
                      float* out);
// fit_gpu on rows prepare_training_rows_gpu left on the device, which it spends (one fit):
// the same model as fit_gpu on the rows prepare_training_rows makes of X. X: the raw rows
// [n, raw_dim] the support vectors are made from (scaled_kept_rows).
Model fit_gpu_prepared(DeviceRows& rows, RawRows X, const int32_t* y, int64_t n, int raw_dim,
                       const PreparedRows& prepared, const FitParams& p, const PairCallback& cb);
// Σ over dropped features of (x_f − v_f)² per row (scaled, not yet compacted X).
std::vector<double> dropped_feature_distance(const float* X, int64_t n, int dim, const std::vector<uint8_t>& keep,
                                             const std::vector<float>& dropped_values);
// dec ← exp(−γ e)·(dec + rho) − rho for rows with e > 0. rbf only: with a linear kernel a
// dropped feature adds x_f·v_f to all of a row's kernel values, which Σ y_t a_t = 0 cancels.
void correct_for_dropped_features(const Model& m, const std::vector<double>& e, double* dec, int64_t n);

}  // namespace svm
