#include "kernels/svm/approx/nystroem.h"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>
#include <stdexcept>

#include "common/error.h"
#include "common/log.h"
#include "kernels/svm/cpu/kernel.h"

// LAPACK through OpenBLAS, which carries it and is linked already (Makefile: -lopenblas; BLAS
// itself through <cblas.h>, as kernels/svm/cpu/kernel.cpp). Debian has no LAPACKE header with
// OpenBLAS, so the Fortran symbols are declared here; the trailing lengths are gfortran's
// hidden lengths of the character arguments.
extern "C" {
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t jobz_len, size_t uplo_len);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t uplo_len);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
             const int* ldb, int* info, size_t uplo_len);
}

namespace svm {

ApproxSpec parse_approx_spec(const std::string& text) {
  const std::string prefix = "nystroem:";
  const std::string digits = text.compare(0, prefix.size(), prefix) == 0 ? text.substr(prefix.size()) : "";
  const bool plain = !digits.empty() && digits.size() <= 6 &&
                     std::all_of(digits.begin(), digits.end(), [](unsigned char ch) { return std::isdigit(ch); });
  const int64_t M = plain ? std::stoll(digits) : 0;
  if (!plain || M < 1 || M > kMaxLandmarks)
    throw cae::UsageError("--approx '" + text + "': expected nystroem:M with M landmarks from 1 to " +
                          std::to_string(kMaxLandmarks));
  ApproxSpec spec;
  spec.landmarks = M;
  return spec;
}

uint64_t nystroem_peak_bytes(int64_t landmarks) {
  const uint64_t m2 = static_cast<uint64_t>(landmarks) * static_cast<uint64_t>(landmarks);
  return m2 * 3 * sizeof(double);
}

std::vector<int64_t> draw_landmarks(int64_t n, int64_t M, uint64_t seed) {
  if (M < 1 || M > n) throw std::invalid_argument("draw_landmarks: M must be in [1, n]");
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  std::mt19937_64 rng(seed);
  // Position i swaps with one of [i, n): the first M positions are a uniform sample.
  for (int64_t i = 0; i < M; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - i));
    std::swap(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(j)]);
  }
  rows.resize(static_cast<size_t>(M));
  std::sort(rows.begin(), rows.end());
  return rows;
}

int64_t nystroem_block_rows(int64_t M) {
  return std::clamp<int64_t>((int64_t{4} << 20) / std::max<int64_t>(M, 1), 16, 4096);
}

NystroemModel nystroem_landmarks(cae::LargeVector<float> landmarks, std::vector<int64_t> indices, int dim,
                                 double gamma, uint64_t seed) {
  if (!(gamma > 0) || !std::isfinite(gamma)) throw std::invalid_argument("nystroem: gamma must be > 0");
  if (indices.empty() || landmarks.size() != indices.size() * static_cast<size_t>(dim))
    throw std::invalid_argument("nystroem: landmarks and their indices disagree");
  NystroemModel m;
  m.M = static_cast<int64_t>(indices.size());
  m.dim = dim;
  m.gamma = gamma;
  m.seed = seed;
  m.landmark_indices = std::move(indices);
  m.landmarks = std::make_shared<cae::LargeVector<float>>(std::move(landmarks));
  return m;
}

NystroemModel nystroem_map(const float* X, int64_t n, int dim, double gamma, const ApproxSpec& spec) {
  std::vector<int64_t> indices = draw_landmarks(n, spec.landmarks, spec.seed);
  cae::LargeVector<float> landmarks(indices.size() * static_cast<size_t>(dim));
  for (size_t l = 0; l < indices.size(); ++l)
    std::copy_n(X + indices[l] * dim, dim, landmarks.data() + l * static_cast<size_t>(dim));
  NystroemModel m = nystroem_landmarks(std::move(landmarks), std::move(indices), dim, gamma, spec.seed);
  nystroem_projection(m);
  return m;
}

void nystroem_projection(NystroemModel& m) {
  const size_t M = static_cast<size_t>(m.M);
  // K_LL as the exact SVM computes kernel blocks (float values, the diagonal exactly 1), then
  // widened for the eigendecomposition.
  std::vector<double> norms(M);
  cpu::row_squared_norms(m.landmarks->data(), m.M, m.dim, norms.data());
  cae::LargeVector<double> K(M * M);
  {
    cae::LargeVector<float> Kf(M * M);
    cpu::kernel_block_symmetric(cpu::KernelSpec{KernelType::rbf, m.gamma}, m.landmarks->data(), m.M, norms.data(),
                                m.dim, Kf.data(), m.M);
    std::copy(Kf.begin(), Kf.end(), K.begin());
  }
  // K is symmetric, so its row-major array is its column-major one. dsyevd leaves the
  // eigenvalues ascending in w and eigenvector t in column t: K[t·M + i] is its component i.
  const int Mi = static_cast<int>(m.M);
  std::vector<double> w(M);
  int info = 0, lwork = -1, liwork = -1, iwork_size = 0;
  double work_size = 0;
  dsyevd_("V", "U", &Mi, K.data(), &Mi, w.data(), &work_size, &lwork, &iwork_size, &liwork, &info, 1, 1);
  if (info != 0) throw std::runtime_error("nystroem: dsyevd's workspace query failed (info " + std::to_string(info) + ")");
  lwork = static_cast<int>(work_size);
  liwork = iwork_size;
  {
    std::vector<double> work(static_cast<size_t>(std::max(lwork, 1)));
    std::vector<int> iwork(static_cast<size_t>(std::max(liwork, 1)));
    dsyevd_("V", "U", &Mi, K.data(), &Mi, w.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  }
  if (info != 0)
    throw std::runtime_error("nystroem: the eigendecomposition of the landmarks' kernel matrix failed (dsyevd info " +
                             std::to_string(info) + ")");
  set_nystroem_projection(m, w.data(), K.data());
}

void set_nystroem_projection(NystroemModel& m, const double* w, const double* U) {
  const size_t M = static_cast<size_t>(m.M);
  const double largest = w[M - 1];
  if (!(largest > 0) || !std::isfinite(largest))
    throw std::runtime_error("nystroem: the landmarks' kernel matrix has no positive eigenvalue");
  std::vector<size_t> kept;  // descending
  for (size_t t = M; t-- > 0;)
    if (w[t] >= kEigenvalueFloor * largest) kept.push_back(t);
  m.rank = static_cast<int>(kept.size());
  const size_t r = kept.size();
  m.eigenvalues.resize(r);
  auto projection = std::make_shared<std::vector<double>>(M * r);
  for (size_t c = 0; c < r; ++c) {
    const size_t t = kept[c];
    m.eigenvalues[c] = w[t];
    const double s = 1.0 / std::sqrt(w[t]);
    for (size_t i = 0; i < M; ++i) (*projection)[i * r + c] = U[t * M + i] * s;
  }
  m.projection = projection;
}

namespace {

// φ of rows [r0, r0 + rows) into phi [rows, ldp] (the first r columns), with the block's
// float kernel values and their widening in Kf and Kd.
void features_block(const NystroemModel& m, const double* l_norms, const float* X, int64_t rows,
                    const double* dropped_distance, std::vector<float>& Kf, std::vector<double>& Kd,
                    std::vector<double>& x_norms, double* phi, int ldp) {
  const int64_t M = m.M;
  cpu::row_squared_norms(X, rows, m.dim, x_norms.data());
  cpu::kernel_block(cpu::KernelSpec{KernelType::rbf, m.gamma}, X, rows, x_norms.data(), m.landmarks->data(), M, l_norms,
                    m.dim, Kf.data(), M);
#pragma omp parallel for schedule(static) if (rows * M >= cpu::kMinParallelWork)
  for (int64_t i = 0; i < rows; ++i) {
    const double factor = dropped_distance && dropped_distance[i] > 0 ? std::exp(-m.gamma * dropped_distance[i]) : 1.0;
    const float* k = Kf.data() + i * M;
    double* d = Kd.data() + i * M;
    for (int64_t l = 0; l < M; ++l) d[l] = factor * static_cast<double>(k[l]);
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(rows), m.rank, static_cast<blasint>(M),
              1.0, Kd.data(), static_cast<blasint>(M), m.projection->data(), m.rank, 0.0, phi, ldp);
}

void check_model(const NystroemModel& m) {
  const size_t M = static_cast<size_t>(m.M), r = static_cast<size_t>(m.rank);
  if (m.M < 1 || m.rank < 1 || m.dim < 1 || !m.landmarks || !m.projection ||
      m.landmarks->size() != M * static_cast<size_t>(m.dim) || m.projection->size() != M * r)
    throw std::invalid_argument("nystroem: inconsistent model");
}

struct BlockScratch {
  std::vector<double> l_norms, x_norms, Kd;
  std::vector<float> Kf;
  int64_t block = 0;
  explicit BlockScratch(const NystroemModel& m, int64_t n) {
    check_model(m);
    block = std::min(nystroem_block_rows(m.M), std::max<int64_t>(n, 1));
    l_norms.resize(static_cast<size_t>(m.M));
    cpu::row_squared_norms(m.landmarks->data(), m.M, m.dim, l_norms.data());
    x_norms.resize(static_cast<size_t>(block));
    Kf.resize(static_cast<size_t>(block * m.M));
    Kd.resize(static_cast<size_t>(block * m.M));
  }
};

}  // namespace

void nystroem_features(const NystroemModel& m, const float* X, int64_t n, const double* dropped_distance,
                       double* phi) {
  BlockScratch s(m, n);
  for (int64_t r0 = 0; r0 < n; r0 += s.block) {
    const int64_t rows = std::min(s.block, n - r0);
    features_block(m, s.l_norms.data(), X + r0 * m.dim, rows, dropped_distance ? dropped_distance + r0 : nullptr, s.Kf,
                   s.Kd, s.x_norms, phi + r0 * m.rank, m.rank);
  }
}

NystroemRowWeights nystroem_row_weights(const int32_t* y, int64_t n, const std::vector<int>& classes,
                                        const ClassWeights& weights) {
  NystroemRowWeights out;
  out.class_index.resize(static_cast<size_t>(n));
  out.scale.resize(static_cast<size_t>(n));
  std::vector<double> class_scale(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) class_scale[c] = std::sqrt(class_weight(weights, classes[c]));
  for (int64_t i = 0; i < n; ++i) {
    const auto at = std::lower_bound(classes.begin(), classes.end(), y[i]);
    if (at == classes.end() || *at != y[i]) throw std::invalid_argument("nystroem: a label outside the classes");
    const size_t c = static_cast<size_t>(at - classes.begin());
    out.class_index[static_cast<size_t>(i)] = static_cast<int32_t>(c);
    out.scale[static_cast<size_t>(i)] = class_scale[c];
  }
  return out;
}

// The classifier of one class c, on the features φ_i = φ(x_i) (r of them) of the n training
// rows, with targets t_ic = +1 where y_i = c, else −1, and row weights s_i (class weights;
// 1 without): the regularised least-squares problem (LS-SVM's primal, Suykens & Vandewalle
// 1999, with its γ as our C)
//
//     min_{w, b}   Σ_i s_i (w·φ_i + b − t_ic)²  +  λ ‖w‖²,      λ = 1 / C,
//
// the bias unregularised, as the SVM's. With z_i = [φ_i, 1] and D = diag(1, …, 1, 0) (the
// bias's entry 0), its gradient 2 (Σ_i s_i z_i z_iᵀ + λ D) [w; b] − 2 Σ_i s_i t_ic z_i vanishes
// at the solution of the normal equations
//
//     (Zᵀ S Z + λ D) [w_c; b_c] = Zᵀ S t_c,
//
// whose matrix is the same for every class: it is accumulated once over blocks of rows, in
// double (Zᵀ S Z by dsyrk, the right-hand sides of all k classes by dgemm, the rows scaled by
// √s_i), and solved for all k right-hand sides by one Cholesky factorisation (dpotrf,
// dpotrs). It is positive definite for λ > 0: zᵀ(…)z = Σ s_i (w·φ_i + b)² + λ‖w‖² is 0 only
// for w = 0 and then b²·Σ s_i. One pass over the rows, memory (r+1)² + block·M doubles.
std::vector<NystroemWeights> fit_nystroem_classifiers(const NystroemModel& m, const float* X, const int32_t* y,
                                                      int64_t n, const std::vector<int>& classes,
                                                      const ClassWeights& weights, const std::vector<double>& Cs,
                                                      const std::string& data_name) {
  const int k = static_cast<int>(classes.size());
  if (k < 2) throw std::invalid_argument("nystroem: fewer than two classes");
  const int r = m.rank;
  const int N = r + 1;  // φ and the bias's constant 1
  const NystroemRowWeights rw = nystroem_row_weights(y, n, classes, weights);
  std::vector<double> G(static_cast<size_t>(N) * N, 0.0), R(static_cast<size_t>(N) * k, 0.0);
  BlockScratch s(m, n);
  std::vector<double> Z(static_cast<size_t>(s.block) * N), T(static_cast<size_t>(s.block) * k);
  for (int64_t r0 = 0; r0 < n; r0 += s.block) {
    const int64_t rows = std::min(s.block, n - r0);
    features_block(m, s.l_norms.data(), X + r0 * m.dim, rows, nullptr, s.Kf, s.Kd, s.x_norms, Z.data(), N);
    for (int64_t i = 0; i < rows; ++i) {
      const int ci = rw.class_index[static_cast<size_t>(r0 + i)];
      const double scale = rw.scale[static_cast<size_t>(r0 + i)];
      double* z = Z.data() + i * N;
      for (int t = 0; t < r; ++t) z[t] *= scale;
      z[r] = scale;
      double* target = T.data() + i * k;
      for (int c = 0; c < k; ++c) target[c] = c == ci ? scale : -scale;
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, N, static_cast<blasint>(rows), 1.0, Z.data(), N, 1.0, G.data(),
                N);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, k, static_cast<blasint>(rows), 1.0, Z.data(), N, T.data(),
                k, 1.0, R.data(), k);
  }
  return solve_nystroem_normal_equations(G, R, r, k, Cs, data_name);
}

std::vector<NystroemWeights> solve_nystroem_normal_equations(const std::vector<double>& G,
                                                             const std::vector<double>& R, int r, int k,
                                                             const std::vector<double>& Cs,
                                                             const std::string& data_name) {
  const int N = r + 1;
  if (G.size() != static_cast<size_t>(N) * N || R.size() != static_cast<size_t>(N) * k)
    throw std::invalid_argument("nystroem: normal equations of the wrong size");
  std::vector<NystroemWeights> out;
  out.reserve(Cs.size());
  for (double C : Cs) {
    if (!(C > 0) || !std::isfinite(C)) throw std::invalid_argument("nystroem: C must be > 0");
    // G's upper triangle in row-major order is the lower one in LAPACK's column-major order.
    std::vector<double> A = G;
    for (int t = 0; t < r; ++t) A[static_cast<size_t>(t) * N + t] += 1.0 / C;
    std::vector<double> B(static_cast<size_t>(N) * k);  // column-major [N, k]
    for (int t = 0; t < N; ++t)
      for (int c = 0; c < k; ++c) B[static_cast<size_t>(c) * N + t] = R[static_cast<size_t>(t) * k + c];
    int info = 0;
    dpotrf_("L", &N, A.data(), &N, &info, 1);
    if (info != 0) fail_not_positive_definite(data_name, C);
    dpotrs_("L", &N, &k, A.data(), &N, B.data(), &N, &info, 1);
    if (info != 0) throw std::runtime_error("nystroem: dpotrs failed (info " + std::to_string(info) + ")");
    out.push_back(nystroem_weights_from_solution(B.data(), r, k, data_name));
  }
  return out;
}

void fail_not_positive_definite(const std::string& data_name, double C) {
  cae::fail_file(data_name, cae::strprintf("the least-squares system of the Nyström features (C %g) is not positive "
                                           "definite in floating point; try a smaller --C", C));
}

NystroemWeights nystroem_weights_from_solution(const double* B, int r, int k, const std::string& data_name) {
  const size_t N = static_cast<size_t>(r) + 1;
  NystroemWeights fitted;
  fitted.weights.resize(static_cast<size_t>(k) * r);
  fitted.bias.resize(static_cast<size_t>(k));
  for (int c = 0; c < k; ++c) {
    std::copy_n(B + static_cast<size_t>(c) * N, r, fitted.weights.data() + static_cast<size_t>(c) * r);
    fitted.bias[static_cast<size_t>(c)] = B[static_cast<size_t>(c) * N + r];
  }
  for (double v : fitted.weights)
    if (!std::isfinite(v)) cae::fail_file(data_name, "the least-squares weights of the Nyström features are not finite");
  for (double v : fitted.bias)
    if (!std::isfinite(v)) cae::fail_file(data_name, "the least-squares weights of the Nyström features are not finite");
  return fitted;
}

void nystroem_pair_decisions(const double* f, int64_t rows, int k, const std::vector<double>& bias, double* dec) {
  const int pairs = k * (k - 1) / 2;
  for (int64_t i = 0; i < rows; ++i) {
    const double* fi = f + i * k;
    double* out = dec + i * pairs;
    int p = 0;
    for (int a = 0; a < k; ++a)
      for (int b = a + 1; b < k; ++b, ++p) out[p] = (fi[a] + bias[a]) - (fi[b] + bias[b]);
  }
}

void nystroem_decision_values(const NystroemModel& m, const float* X, int64_t n, const double* dropped_distance,
                              double* dec) {
  if (m.weights.size() != static_cast<size_t>(m.classes()) * static_cast<size_t>(m.rank))
    throw std::invalid_argument("nystroem: inconsistent model");
  const int k = m.classes(), r = m.rank;
  const int pairs = k * (k - 1) / 2;
  BlockScratch s(m, n);
  std::vector<double> phi(static_cast<size_t>(s.block) * r), f(static_cast<size_t>(s.block) * k);
  for (int64_t r0 = 0; r0 < n; r0 += s.block) {
    const int64_t rows = std::min(s.block, n - r0);
    features_block(m, s.l_norms.data(), X + r0 * m.dim, rows, dropped_distance ? dropped_distance + r0 : nullptr, s.Kf,
                   s.Kd, s.x_norms, phi.data(), r);
    // f = φ Wᵀ, then the bias.
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), k, r, 1.0, phi.data(), r,
                m.weights.data(), r, 0.0, f.data(), k);
    nystroem_pair_decisions(f.data(), rows, k, m.bias, dec + r0 * pairs);
  }
}

}  // namespace svm
