// Nyström features and a regularised least-squares classifier on them: svm-fit --approx
// nystroem:M (issue 63; docs/SVM.md, "Nyström features"; docs/DECISIONS.md, "Nyström features
// and a least-squares classifier"). The exact SVM's cost grows with the square of the rows;
// this one with n·M, one pass over the rows.
//
//   landmarks  L: M training rows drawn uniformly without replacement (seeded), the rows as
//              the exact fit sees them (scaled, constant features dropped)
//   projection P = U Λ^(-1/2) of K_LL = U Λ Uᵀ (LAPACK dsyevd), eigenvalues below
//              kEigenvalueFloor × the largest dropped: φ(x) = K(x, L) · P has r <= M columns
//              and φ(x)·φ(y) = K(x, L) K_LL⁺ K(L, y), the Nyström approximation of K(x, y)
//   classifier f_c(x) = w_c·φ(x) + b_c per class (targets ±1), all classes in one pass; the
//              pair (a, b) of the one-vs-one layout gets f_a − f_b, so the exact model's vote,
//              probability sigmoids and metrics apply unchanged
//
// The same RBF kernel (kernels/svm/cpu/kernel.h), gamma and standardisation as the exact fit:
// Classifier (classifier.h) prepares the rows as for the exact SVM and calls these on them.
// The kernel rows K(x, L) are made a block of rows at a time by sgemm and never held for all
// rows: memory O(M² + block·M) beside the rows.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/large_buffer.h"
#include "kernels/svm/svm.h"

namespace svm {

struct DeviceRows;  // cuda/svm_gpu.cuh

// The largest M: dsyevd's workspace (1 + 6M + 2M² doubles) must be counted in a 32-bit int.
inline constexpr int64_t kMaxLandmarks = 30000;
// Eigenvalues of K_LL below this fraction of the largest are dropped (their directions are
// rounding noise: K's float values carry ~6e-8 of relative error).
inline constexpr double kEigenvalueFloor = 1e-6;

// svm-fit --approx nystroem:M [--approx-seed S]; landmarks 0: the exact SVM.
struct ApproxSpec {
  int64_t landmarks = 0;
  uint64_t seed = 1;
  bool enabled() const { return landmarks > 0; }
};
// "nystroem:M", M digits only (no sign, no spaces), 1 <= M <= kMaxLandmarks; cae::UsageError
// naming --approx otherwise.
ApproxSpec parse_approx_spec(const std::string& text);
// The most memory a fit of M landmarks holds at once beyond the rows: K_LL in double and
// dsyevd's workspace of 2M² doubles, 3 M² doubles (the float kernel matrix K_LL is made from
// goes before; the projection and the normal equations, 2 M², come after the workspace).
uint64_t nystroem_peak_bytes(int64_t landmarks);

// A fitted approximation: what prediction needs beside the scaler and the feature mask. The
// landmarks and the projection, M·D floats and M·r doubles, are shared, never changed once
// made: the models of every C of one map (a --cv fold's C list) hold one copy of them.
struct NystroemModel {
  int64_t M = 0;    // landmarks
  int dim = 0;      // features of a landmark (kept features)
  int rank = 0;     // r: eigenvalues kept, columns of the projection
  double gamma = 0;
  uint64_t seed = 0;
  std::shared_ptr<const cae::LargeVector<float>> landmarks;  // [M, dim], scaled and compacted training rows
  std::vector<int64_t> landmark_indices;  // [M] their rows in the training set, ascending
  std::vector<double> eigenvalues;        // [r] the kept eigenvalues of K_LL, descending
  std::shared_ptr<const std::vector<double>> projection;     // [M, r] P = U Λ^(-1/2)
  std::vector<double> weights;            // [k, r] w_c, classes in ascending label order
  std::vector<double> bias;               // [k]
  int classes() const { return static_cast<int>(bias.size()); }
};

// The M rows of n drawn uniformly without replacement by seed (a partial Fisher–Yates with
// mt19937_64 drawn by hand, as common/shuffle.h, the same on every standard library),
// ascending. Needs 1 <= M <= n.
std::vector<int64_t> draw_landmarks(int64_t n, int64_t M, uint64_t seed);

// The landmarks of rows X [n, dim] (prepared as for the exact fit) and the projection from
// K_LL's eigendecomposition; fills everything but the weights and bias. The two steps:
NystroemModel nystroem_map(const float* X, int64_t n, int dim, double gamma, const ApproxSpec& spec);
// A map of the landmark rows `landmarks` [M, dim] (rows `indices` of the training set, as
// draw_landmarks gives them), without its projection.
NystroemModel nystroem_landmarks(cae::LargeVector<float> landmarks, std::vector<int64_t> indices, int dim,
                                 double gamma, uint64_t seed);
// m's projection from K_LL of its landmarks: on the CPU (LAPACK dsyevd), or on the GPU
// (cuSOLVER's dsyevd; cuda/nystroem_gpu.cu), the same up to rounding and the signs of the
// eigenvectors, which φ·φ and every model on φ do not see.
void nystroem_projection(NystroemModel& m);
void nystroem_projection_gpu(NystroemModel& m);
// Both projections' end, from K_LL = U diag(w) Uᵀ: w [M] ascending and eigenvector t in column
// t of the column-major U [M, M], as dsyevd leaves them. Sets rank, eigenvalues, projection.
void set_nystroem_projection(NystroemModel& m, const double* w, const double* U);

// Rows per block of the kernel rows K(x, L): ~16 MB of float kernel values, the same for
// every thread count, so a block's BLAS calls have the shape one process gives them.
int64_t nystroem_block_rows(int64_t M);

// φ of rows X [n, dim] into phi [n, r]. dropped_distance: null, or per row the squared
// distance in the features the mask dropped (correct_for_dropped_features): the landmarks
// all have the training rows' values there, so every K(x, l) has the factor exp(−γ e).
void nystroem_features(const NystroemModel& m, const float* X, int64_t n, const double* dropped_distance,
                       double* phi);

// The least-squares classifiers on φ of the training rows X [n, dim] (m from nystroem_map on
// the same rows), labels y, for each C of Cs: the weights and bias of that C (m's weights and
// bias are not read). The normal equations are accumulated once for all C (only the ridge
// differs). Row i weighs class_weight(weights, y_i), as C·w_c bounds the exact SVM's
// multipliers. `classes`: the distinct labels ascending. data_name names the rows in errors.
struct NystroemWeights {
  std::vector<double> weights, bias;  // [k, r], [k]
};
std::vector<NystroemWeights> fit_nystroem_classifiers(const NystroemModel& m, const float* X, const int32_t* y,
                                                      int64_t n, const std::vector<int>& classes,
                                                      const ClassWeights& weights, const std::vector<double>& Cs,
                                                      const std::string& data_name);
// The same on the GPU (cuda/nystroem_gpu.cu): X as above, or null with `device_rows` the rows
// prepare_training_rows_gpu left there (read, not spent), in class order (class_sorted_places).
std::vector<NystroemWeights> fit_nystroem_classifiers_gpu(const NystroemModel& m, const float* X,
                                                          const DeviceRows* device_rows, const int32_t* y, int64_t n,
                                                          const std::vector<int>& classes, const ClassWeights& weights,
                                                          const std::vector<double>& Cs, const std::string& data_name);

// ---- the steps both devices share ----
// Row i's class (its place in `classes`) and √class_weight(weights, y_i), the factor its row
// and targets carry in the normal equations. Throws std::invalid_argument for a label outside.
struct NystroemRowWeights {
  std::vector<int32_t> class_index;
  std::vector<double> scale;
};
NystroemRowWeights nystroem_row_weights(const int32_t* y, int64_t n, const std::vector<int>& classes,
                                        const ClassWeights& weights);
// The weights for each C of Cs from the accumulated normal equations: G = Zᵀ S Z [N, N]
// (row-major, its upper triangle read; N = rank + 1) and R = Zᵀ S T [N, k]: the CPU's
// Cholesky (LAPACK). The GPU solves its own on the device (cuSOLVER; cuda/nystroem_gpu.cu).
std::vector<NystroemWeights> solve_nystroem_normal_equations(const std::vector<double>& G,
                                                             const std::vector<double>& R, int rank, int k,
                                                             const std::vector<double>& Cs,
                                                             const std::string& data_name);
// The weights of the solution B (column-major [N, k], N = r + 1: w_c then b_c in column c), or
// the failure naming data_name where one is not finite.
NystroemWeights nystroem_weights_from_solution(const double* B, int r, int k, const std::string& data_name);
// The failure of a Cholesky factorisation of the system of C (cae::fail_file naming data_name).
[[noreturn]] void fail_not_positive_definite(const std::string& data_name, double C);
// dec [rows, k(k−1)/2] from the class scores f [rows, k] (w_c·φ(x), without the bias).
void nystroem_pair_decisions(const double* f, int64_t rows, int k, const std::vector<double>& bias, double* dec);

// The one-vs-one decision values [n, k(k−1)/2] of rows X [n, dim]: pair (a, b) in libsvm's
// order gets f_a − f_b (> 0 votes for a, as svm::vote reads them).
void nystroem_decision_values(const NystroemModel& m, const float* X, int64_t n, const double* dropped_distance,
                              double* dec);
void nystroem_decision_values_gpu(const NystroemModel& m, const float* X, int64_t n, const double* dropped_distance,
                                  double* dec);

}  // namespace svm
