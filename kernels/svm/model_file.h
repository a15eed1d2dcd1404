// Everything around the SVM solver that svm-fit and svm-eval share: reading encoder features
// (format "ae-features"), scikit-learn-exact standardisation, the mask of features that are
// constant over the training set, gamma resolution, the svm-model file (docs/FORMATS.md)
// and export to libsvm's own text formats.
//
// Why the details are as they are is in docs/SVM.md; in short:
//  * scaling reproduces StandardScaler on float32 input bit for bit in intent: mean/var in
//    double (corrected two-pass), scale 1 for (near-)constant features by sklearn's own
//    test, x' = f32(f32(x − mean) / scale);
//  * gamma 'scale' = 1 / (D · Var(X')) over all N·D entries of the scaled matrix, D counting
//    every feature (also the constant ones), which is exactly SVC's number on that matrix;
//  * features constant over the scaled training set are dropped before the kernel: they
//    add nothing to any training distance. An input whose dropped feature f differs from the
//    training value v_f adds Σ (x'_f − v_f)² to its distance to every support vector — a
//    common factor exp(−γ e) on its rbf kernel values, applied after the fact
//    (correct_for_dropped_features), so predictions equal an SVM on all D features.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/hdf5_io.h"
#include "kernels/svm/svm.h"

namespace cae {

// ---- features --------------------------------------------------------------------------------
struct FeatureSplit {
  std::vector<float> X;          // [n, dim] row-major
  std::vector<int32_t> labels;   // [n]
  int64_t n = 0;
  int dim = 0;
};

class FeaturesReader {
 public:
  explicit FeaturesReader(const std::string& path);  // checks format "ae-features"
  const std::string& path() const { return h5_.path(); }
  bool has_split(const std::string& split) const;
  int64_t count(const std::string& split) const;  // rows of /<split>/features
  int dim(const std::string& split) const;
  std::vector<std::string> class_names() const;  // root class_names, or "0", "1", ...
  // The first `rows` rows; requires /<split>/labels (uint8, same length, < class count) and
  // that every feature is finite, else throws "<file>: <problem>".
  FeatureSplit read(const std::string& split, int64_t rows) const;

 private:
  Hdf5Reader h5_;
};

// ---- scaling, mask, gamma ---------------------------------------------------------------------
struct Scaler {
  std::vector<double> mean, scale;  // [D]
};
Scaler fit_standard_scaler(const float* X, int64_t n, int dim);  // sklearn's StandardScaler
Scaler identity_scaler(int dim);
void apply_scaler(const Scaler& s, float* X, int64_t n, int dim);

// 1 / (dim · Var) over all n·dim entries (1 when Var is 0), as sklearn's gamma='scale'.
double gamma_scale(const float* X, int64_t n, int dim);
// "scale", "auto" or a number > 0 → the number (throws UsageError on a bad spec).
double resolve_gamma(const std::string& spec, const float* X, int64_t n, int dim);

// keep[f] = 0 when column f has one value over all n rows; that value goes to *dropped_values
// (in the order of the dropped features).
std::vector<uint8_t> constant_feature_mask(const float* X, int64_t n, int dim, std::vector<float>* dropped_values);
// Moves the kept columns of each row to the front, in place; returns the kept count.
int compact_features(float* X, int64_t n, int dim, const std::vector<uint8_t>& keep);
// Σ over dropped features of (x_f − v_f)² per row (scaled, not yet compacted X).
std::vector<double> dropped_feature_distance(const float* X, int64_t n, int dim, const std::vector<uint8_t>& keep,
                                             const std::vector<float>& dropped_values);
// dec ← exp(−γ e)·(dec + rho) − rho for rows with e > 0. rbf only: with a linear kernel a
// dropped feature adds x_f·v_f to all of a row's kernel values, which Σ y_t a_t = 0 cancels.
void correct_for_dropped_features(const svm::Model& m, const std::vector<double>& e, double* dec, int64_t n);

// ---- the svm-model file ----------------------------------------------------------------------
struct SvmModelFile {
  svm::Model model;
  Scaler scaler;
  std::vector<uint8_t> feature_mask;  // [D]
  std::vector<float> dropped_values;  // [D − D_kept], scaled training value of each dropped feature
  std::string gamma_spec = "scale";
  double C = 10, tol = 1e-3;
  int64_t n_train = 0;
  double fit_seconds = 0;
  std::string device = "cpu";
  std::vector<std::string> class_names;
  int n_features() const { return static_cast<int>(feature_mask.size()); }
};

// Datasets and SVM attributes (provenance is the caller's).
void write_svm_model(Hdf5Writer& w, const SvmModelFile& f);
// Checks format, dtypes, shapes and their consistency.
SvmModelFile read_svm_model(const std::string& path);

// libsvm text model (svm_type c_svc) with feature indices 1..D of the scaled input; libsvm's
// svm-predict gives the model's predictions on data written by write_libsvm_data. Both write
// out.temp_path(); the caller commits.
void write_libsvm_model(const AtomicOutput& out, const SvmModelFile& f);
// "label index:value ..." per row, non-zero values of the scaled [n, dim] matrix.
void write_libsvm_data(const AtomicOutput& out, const float* X, const int32_t* labels, int64_t n, int dim);

}  // namespace cae
