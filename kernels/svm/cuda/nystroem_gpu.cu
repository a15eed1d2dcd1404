// The Nyström features on the GPU: nystroem_projection_gpu, fit_nystroem_classifiers_gpu and
// nystroem_decision_values_gpu (kernels/svm/approx/nystroem.h), the CPU's steps on the device
// (docs/SVM.md, "Nyström features"):
//
//   projection  K_LL by SGEMM + the exact SVM's rbf pass (symmetric_kernel_from_dots), widened
//               to double, eigendecomposed by cuSOLVER's dsyevd; the floor and P = U Λ^(-1/2)
//               on the host (set_nystroem_projection, the CPU's code)
//   fit         per block of rows: SGEMM against the landmarks → kernel values in double
//               (kernel_from_dots) → φ = K·P by DGEMM → the rows' weights and targets → the
//               normal equations Zᵀ S Z and Zᵀ S T by DGEMM, summed on the device in double;
//               then solved there for each C by cuSOLVER's Cholesky (dpotrf, dpotrs), the
//               calls the CPU makes to LAPACK
//   decisions   per block: the kernel values as above, then f = K · (P Wᵀ) by DGEMM: k columns
//               instead of r, the same scores up to rounding
//
// The rows are the ones the CPU would use: the training rows prepare_training_rows_gpu left on
// the device (class order, so the rows' weights go in that order too), or host rows uploaded a
// block at a time. Memory: the landmarks, P and the normal equations, O(M·d + M·r + r²), and
// one block of ~2 GB at most.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/cusolver_runtime.h"
#include "kernels/svm/approx/nystroem.h"
#include "kernels/svm/cuda/svm_gpu.cuh"

namespace svm {
namespace {

using cae::cuda::DeviceBuffer;
using cae::cuda::PinnedRange;
using cuda::Blas;
using cuda::Stream;

unsigned grid_for(int64_t count, int threads) {
  return static_cast<unsigned>(std::clamp<int64_t>((count + threads - 1) / threads, 1, int64_t{1} << 16));
}

__global__ void widen_kernel(const float* __restrict__ in, int64_t count, double* __restrict__ out) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[e] = static_cast<double>(in[e]);
}

// Z [rows, N] holds φ in its first r columns: row i times scale[i], then column r = scale[i]
// (the bias's 1, weighted); T [rows, k] = ±scale[i] (+ for the row's class).
__global__ void weigh_rows_kernel(double* __restrict__ Z, int64_t rows, int r, int N, const double* __restrict__ scale,
                                  const int32_t* __restrict__ class_index, double* __restrict__ T, int k) {
  const int width = max(N, k);
  const int64_t total = rows * width;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / width;
    const int t = static_cast<int>(e - i * width);
    const double s = scale[i];
    if (t < N) Z[i * N + t] = t < r ? Z[i * N + t] * s : s;
    if (t < k) T[i * k + t] = t == class_index[i] ? s : -s;
  }
}

// A = G + diag(1/C on the first r entries, 0 on the bias's), both [N, N]; B (column-major
// [N, k]) = R (row-major [N, k]).
__global__ void ridge_system_kernel(const double* __restrict__ G, int N, int r, double ridge, double* __restrict__ A,
                                    const double* __restrict__ R, int k, double* __restrict__ B) {
  const int64_t total = static_cast<int64_t>(N) * N;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e / N, j = e - i * N;
    A[e] = G[e] + (i == j && i < r ? ridge : 0.0);
    if (j < k) B[j * N + i] = R[i * k + j];
  }
}

void check_cusolver(cusolverStatus_t status, const char* what) {
  if (status != CUSOLVER_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuSOLVER: ") + what + " failed (status " + std::to_string(status) + ")");
}

// An owning cuSOLVER handle on `stream`.
class Solver {
 public:
  explicit Solver(cudaStream_t stream) {
    check_cusolver(api_.create(&h_), "cusolverDnCreate");
    check_cusolver(api_.set_stream(h_, stream), "cusolverDnSetStream");
  }
  ~Solver() { api_.destroy(h_); }
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;
  cusolverDnHandle_t get() const { return h_; }

 private:
  const cae::cusolver::Api& api_ = cae::cusolver::api();  // loaded on first use (common/cusolver_runtime.h)
  cusolverDnHandle_t h_ = nullptr;
};

// Row-major C [rows, cols] (ldc) = A [rows, ld] · B [cols, ld]ᵀ in true FP32, as the CPU's sgemm.
void sgemm_dots(cublasHandle_t h, const float* A, int64_t rows, const float* B, int64_t cols, int64_t ld, float* C,
          int64_t ldc) {
  const float one = 1.0f, zero = 0.0f;
  SVM_CUBLAS_CHECK(cae::cublas::api().sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(cols),
                                            static_cast<int>(rows), static_cast<int>(ld), &one, B,
                                            static_cast<int>(ld), A, static_cast<int>(ld), &zero, C,
                                            static_cast<int>(ldc)));
}

// Row-major C [m, n] (ldc) = op(A) · op(B) + beta·C in double, the operands row-major: cuBLAS
// sees the column-major transposes, Cᵀ = op(B)ᵀ · op(A)ᵀ.
void dgemm_rowmajor(cublasHandle_t h, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const double* A,
                    int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  const double one = 1.0;
  SVM_CUBLAS_CHECK(cae::cublas::api().dgemm(
      h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
      static_cast<int>(m), static_cast<int>(k), &one, B, static_cast<int>(ldb), A, static_cast<int>(lda), &beta, C,
      static_cast<int>(ldc)));
}

// The landmarks on the device, ld = device_row_stride apart, and their squared norms.
struct DeviceLandmarks {
  int64_t M = 0, ld = 0;
  DeviceBuffer<float> L;
  DeviceBuffer<double> norms;
  DeviceLandmarks(const NystroemModel& m, cudaStream_t s)
      : M(m.M), ld(cuda::device_row_stride(m.dim)), L(static_cast<size_t>(m.M * ld)), norms(static_cast<size_t>(m.M)) {
    cuda::upload_rows(L.get(), m.landmarks->data(), m.M, m.dim, ld, s);
    cuda::row_squared_norms(L.get(), M, m.dim, ld, norms.get(), s);
  }
};

// The kernel values K(x, L) in double of `rows` rows at X (ld apart, norms computed here).
struct KernelBlock {
  DeviceBuffer<float> dots;
  DeviceBuffer<double> x_norms, K;
  KernelBlock(int64_t block, int64_t M)
      : dots(static_cast<size_t>(block * M)), x_norms(static_cast<size_t>(block)), K(static_cast<size_t>(block * M)) {}
  void compute(cublasHandle_t h, const NystroemModel& m, const DeviceLandmarks& L, const float* X, int64_t rows,
               cudaStream_t s) {
    cuda::row_squared_norms(X, rows, m.dim, L.ld, x_norms.get(), s);
    sgemm_dots(h, X, rows, L.L.get(), L.M, L.ld, dots.get(), L.M);
    cuda::kernel_from_dots(dots.get(), rows, L.M, x_norms.get(), L.norms.get(), KernelType::rbf, m.gamma, K.get(),
                           s);
  }
};

// Rows per block: `per_row` bytes each within ~2 GB, or a quarter of free memory when less.
int64_t block_rows(int64_t per_row, int64_t n) {
  const int64_t budget =
      std::min<int64_t>(int64_t{2} << 30, std::max<int64_t>(cuda::free_device_bytes() / 4, per_row));
  return std::clamp<int64_t>(budget / per_row, 1, std::max<int64_t>(n, 1));
}

void check_model(const NystroemModel& m) {
  if (m.M < 1 || m.rank < 1 || m.dim < 1 || !m.landmarks || !m.projection ||
      m.landmarks->size() != static_cast<size_t>(m.M) * static_cast<size_t>(m.dim) ||
      m.projection->size() != static_cast<size_t>(m.M) * static_cast<size_t>(m.rank))
    throw std::invalid_argument("nystroem: inconsistent model");
}

// solve_nystroem_normal_equations on the device: for each C, A = G + I/C (w's entries) is
// factorised by cuSOLVER's dpotrf and all k right-hand sides solved by dpotrs, as the CPU's
// LAPACK calls (nystroem.cpp), so the Cholesky of r + 1 unknowns never waits on the host.
std::vector<NystroemWeights> solve_on_device(const DeviceBuffer<double>& G, const DeviceBuffer<double>& R, int r,
                                             int k, const std::vector<double>& Cs, const std::string& data_name,
                                             cudaStream_t s) {
  const int N = r + 1;
  const Solver solver(s);
  const cae::cusolver::Api& api = cae::cusolver::api();
  DeviceBuffer<double> A(static_cast<size_t>(N) * N), B(static_cast<size_t>(N) * k);
  DeviceBuffer<int> info(1);
  int lwork = 0;
  check_cusolver(api.dpotrf_buffer_size(solver.get(), CUBLAS_FILL_MODE_LOWER, N, A.get(), N, &lwork),
                 "dpotrf_bufferSize");
  DeviceBuffer<double> work(static_cast<size_t>(std::max(lwork, 1)));
  std::vector<NystroemWeights> out;
  out.reserve(Cs.size());
  std::vector<double> solution(static_cast<size_t>(N) * k);
  for (double C : Cs) {
    if (!(C > 0) || !std::isfinite(C)) throw std::invalid_argument("nystroem: C must be > 0");
    ridge_system_kernel<<<grid_for(static_cast<int64_t>(N) * N, 256), 256, 0, s>>>(G.get(), N, r, 1.0 / C, A.get(),
                                                                                    R.get(), k, B.get());
    AE_CUDA_LAUNCH_CHECK();
    // G is symmetric: its row-major array is the column-major one, either triangle.
    check_cusolver(api.dpotrf(solver.get(), CUBLAS_FILL_MODE_LOWER, N, A.get(), N, work.get(), lwork, info.get()),
                   "dpotrf");
    int host_info = 0;
    AE_CUDA_CHECK(cudaMemcpyAsync(&host_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(cudaStreamSynchronize(s));
    if (host_info != 0) fail_not_positive_definite(data_name, C);
    check_cusolver(api.dpotrs(solver.get(), CUBLAS_FILL_MODE_LOWER, N, k, A.get(), N, B.get(), N, info.get()),
                   "dpotrs");
    AE_CUDA_CHECK(cudaMemcpyAsync(&host_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(
        cudaMemcpyAsync(solution.data(), B.get(), sizeof(double) * solution.size(), cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(cudaStreamSynchronize(s));
    if (host_info != 0) throw std::runtime_error("nystroem: cuSOLVER dpotrs failed (info " + std::to_string(host_info) + ")");
    out.push_back(nystroem_weights_from_solution(solution.data(), r, k, data_name));
  }
  return out;
}

}  // namespace

void nystroem_projection_gpu(NystroemModel& m) {
  if (m.M < 1 || !m.landmarks || m.landmarks->size() != static_cast<size_t>(m.M) * static_cast<size_t>(m.dim))
    throw std::invalid_argument("nystroem: inconsistent landmarks");
  const Stream stream;
  const cudaStream_t s = stream.get();
  const Blas blas(s);
  const Solver solver(s);
  const DeviceLandmarks L(m, s);
  const int64_t M = m.M;
  const size_t MM = static_cast<size_t>(M) * static_cast<size_t>(M);
  DeviceBuffer<double> K(MM), w(static_cast<size_t>(M));
  {
    DeviceBuffer<float> Kf(MM);
    sgemm_dots(blas.get(), L.L.get(), M, L.L.get(), M, L.ld, Kf.get(), M);
    cuda::symmetric_kernel_from_dots(Kf.get(), M, M, L.norms.get(), KernelType::rbf, m.gamma, s);
    widen_kernel<<<grid_for(static_cast<int64_t>(MM), 256), 256, 0, s>>>(Kf.get(), static_cast<int64_t>(MM), K.get());
    AE_CUDA_LAUNCH_CHECK();
    stream.sync();
  }
  // As the CPU's dsyevd: K symmetric, so its row-major array is the column-major one; the
  // eigenvalues ascending, eigenvector t in column t.
  const cae::cusolver::Api& api = cae::cusolver::api();
  const int Mi = static_cast<int>(M);
  int lwork = 0;
  check_cusolver(api.dsyevd_buffer_size(solver.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, Mi, K.get(), Mi,
                                        w.get(), &lwork),
                 "dsyevd_bufferSize");
  DeviceBuffer<double> work(static_cast<size_t>(std::max(lwork, 1)));
  DeviceBuffer<int> info(1);
  check_cusolver(api.dsyevd(solver.get(), CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, Mi, K.get(), Mi, w.get(),
                            work.get(), lwork, info.get()),
                 "dsyevd");
  std::vector<double> host_w(static_cast<size_t>(M)), host_U(MM);
  int host_info = 0;
  AE_CUDA_CHECK(cudaMemcpyAsync(&host_info, info.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
  AE_CUDA_CHECK(cudaMemcpyAsync(host_w.data(), w.get(), sizeof(double) * M, cudaMemcpyDeviceToHost, s));
  AE_CUDA_CHECK(cudaMemcpyAsync(host_U.data(), K.get(), sizeof(double) * MM, cudaMemcpyDeviceToHost, s));
  stream.sync();
  if (host_info != 0)
    throw std::runtime_error("nystroem: the eigendecomposition of the landmarks' kernel matrix failed (cuSOLVER "
                             "dsyevd info " + std::to_string(host_info) + ")");
  set_nystroem_projection(m, host_w.data(), host_U.data());
}

std::vector<NystroemWeights> fit_nystroem_classifiers_gpu(const NystroemModel& m, const float* X,
                                                          const DeviceRows* device_rows, const int32_t* y, int64_t n,
                                                          const std::vector<int>& classes, const ClassWeights& weights,
                                                          const std::vector<double>& Cs,
                                                          const std::string& data_name) {
  check_model(m);
  const int k = static_cast<int>(classes.size());
  if (k < 2) throw std::invalid_argument("nystroem: fewer than two classes");
  if (!X == !device_rows) throw std::invalid_argument("nystroem: rows on the host or on the device, one of them");
  const int64_t ld = cuda::device_row_stride(m.dim);
  if (device_rows && (device_rows->n != n || device_rows->dim != m.dim || device_rows->ld != ld))
    throw std::invalid_argument("nystroem: the device rows are not the model's");
  const int r = m.rank, N = r + 1;
  const int64_t M = m.M;

  // The rows' weights in the order the rows are read: the device rows are in class order.
  NystroemRowWeights rw = nystroem_row_weights(y, n, classes, weights);
  if (device_rows) {
    const std::vector<int64_t> place = cuda::class_sorted_places(y, n);
    NystroemRowWeights sorted = rw;
    for (int64_t i = 0; i < n; ++i) {
      sorted.class_index[static_cast<size_t>(place[i])] = rw.class_index[static_cast<size_t>(i)];
      sorted.scale[static_cast<size_t>(place[i])] = rw.scale[static_cast<size_t>(i)];
    }
    rw = std::move(sorted);
  }

  const PinnedRange pinned_x(X, X ? static_cast<size_t>(n) * static_cast<size_t>(m.dim) * sizeof(float) : 0);
  const Stream stream;
  const cudaStream_t s = stream.get();
  const Blas blas(s);
  const DeviceLandmarks L(m, s);
  DeviceBuffer<double> P(m.projection->size()), G(static_cast<size_t>(N) * N), R(static_cast<size_t>(N) * k);
  DeviceBuffer<double> scale(static_cast<size_t>(n));
  DeviceBuffer<int32_t> class_index(static_cast<size_t>(n));
  AE_CUDA_CHECK(cudaMemcpyAsync(P.get(), m.projection->data(), sizeof(double) * m.projection->size(),
                                cudaMemcpyHostToDevice, s));
  AE_CUDA_CHECK(cudaMemcpyAsync(scale.get(), rw.scale.data(), sizeof(double) * n, cudaMemcpyHostToDevice, s));
  AE_CUDA_CHECK(
      cudaMemcpyAsync(class_index.get(), rw.class_index.data(), sizeof(int32_t) * n, cudaMemcpyHostToDevice, s));
  AE_CUDA_CHECK(cudaMemsetAsync(G.get(), 0, sizeof(double) * N * N, s));
  AE_CUDA_CHECK(cudaMemsetAsync(R.get(), 0, sizeof(double) * N * k, s));

  const int64_t per_row = M * 12 + (N + k + 1) * 8 + (X ? ld * 4 : 0);
  const int64_t block = block_rows(per_row, n);
  KernelBlock kb(block, M);
  DeviceBuffer<double> Z(static_cast<size_t>(block * N)), T(static_cast<size_t>(block * k));
  DeviceBuffer<float> uploaded(X ? static_cast<size_t>(block * ld) : 0);
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    const float* x = device_rows ? device_rows->X.get() + r0 * ld : uploaded.get();
    if (X) cuda::upload_rows(uploaded.get(), X + r0 * m.dim, rows, m.dim, ld, s);
    kb.compute(blas.get(), m, L, x, rows, s);
    dgemm_rowmajor(blas.get(), false, false, rows, r, M, kb.K.get(), M, P.get(), r, 0.0, Z.get(), N);  // φ = K·P
    weigh_rows_kernel<<<grid_for(rows * std::max(N, k), 256), 256, 0, s>>>(Z.get(), rows, r, N, scale.get() + r0,
                                                               class_index.get() + r0, T.get(), k);
    AE_CUDA_LAUNCH_CHECK();
    dgemm_rowmajor(blas.get(), true, false, N, N, rows, Z.get(), N, Z.get(), N, 1.0, G.get(), N);  // G += ZᵀZ
    dgemm_rowmajor(blas.get(), true, false, N, k, rows, Z.get(), N, T.get(), k, 1.0, R.get(), k);  // R += ZᵀT
  }
  // The rows' buffers go before the solve's.
  Z.release();
  T.release();
  uploaded.release();
  kb = KernelBlock(0, 0);
  return solve_on_device(G, R, r, k, Cs, data_name, s);
}

void nystroem_decision_values_gpu(const NystroemModel& m, const float* X, int64_t n, const double* dropped_distance,
                                  double* dec) {
  check_model(m);
  const int k = m.classes(), r = m.rank;
  if (k < 2 || m.weights.size() != static_cast<size_t>(k) * static_cast<size_t>(r))
    throw std::invalid_argument("nystroem: inconsistent model");
  if (n <= 0) return;
  const int pairs = k * (k - 1) / 2;
  const int64_t M = m.M, ld = cuda::device_row_stride(m.dim);
  const PinnedRange pinned_x(X, static_cast<size_t>(n) * static_cast<size_t>(m.dim) * sizeof(float));
  const Stream stream;
  const cudaStream_t s = stream.get();
  const Blas blas(s);
  const DeviceLandmarks L(m, s);
  DeviceBuffer<double> Q(static_cast<size_t>(M) * k);
  {
    DeviceBuffer<double> P(m.projection->size()), W(m.weights.size());
    AE_CUDA_CHECK(cudaMemcpyAsync(P.get(), m.projection->data(), sizeof(double) * P.size(), cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(W.get(), m.weights.data(), sizeof(double) * W.size(), cudaMemcpyHostToDevice, s));
    dgemm_rowmajor(blas.get(), false, true, M, k, r, P.get(), r, W.get(), r, 0.0, Q.get(), k);  // Q = P·Wᵀ
    stream.sync();
  }
  const int64_t block = block_rows(M * 12 + ld * 4 + k * 8 + 8, n);
  KernelBlock kb(block, M);
  DeviceBuffer<float> x(static_cast<size_t>(block * ld));
  DeviceBuffer<double> F(static_cast<size_t>(block * k));
  std::vector<double> f(static_cast<size_t>(block * k));
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    cuda::upload_rows(x.get(), X + r0 * m.dim, rows, m.dim, ld, s);
    kb.compute(blas.get(), m, L, x.get(), rows, s);
    dgemm_rowmajor(blas.get(), false, false, rows, k, M, kb.K.get(), M, Q.get(), k, 0.0, F.get(), k);  // f = K·Q
    AE_CUDA_CHECK(cudaMemcpyAsync(f.data(), F.get(), sizeof(double) * rows * k, cudaMemcpyDeviceToHost, s));
    stream.sync();
    // The dropped features' factor exp(−γ e) is on every K(x, l) of the row, so on its scores.
    if (dropped_distance)
      for (int64_t i = 0; i < rows; ++i) {
        const double e = dropped_distance[r0 + i];
        if (e > 0)
          for (int c = 0; c < k; ++c) f[static_cast<size_t>(i * k + c)] *= std::exp(-m.gamma * e);
      }
    nystroem_pair_decisions(f.data(), rows, k, m.bias, dec + r0 * pairs);
  }
}

}  // namespace svm
