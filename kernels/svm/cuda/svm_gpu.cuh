// The GPU SVM's internals: the device kernels (svm_gpu_kernels.cu) and the host driver
// (svm_gpu.cu) behind svm::fit_gpu and svm::decision_values_gpu. Design: docs/SVM_GPU.md.
//
// In short: the training rows are sorted by class on the device, the kernel matrix K(X, X)
// is built with cuBLAS SGEMM (upper block triangle) plus one pass that applies the rbf
// exponential and mirrors the lower triangle, and then every one-vs-one pair runs libsvm's
// SMO (second-order working-set selection, no shrinking) in its own persistent thread block,
// all pairs in one launch. Larger problems, or where the whole matrix does not fit, go to
// the working-set solver (working_set_gpu.cuh), which holds no pair's matrix.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "common/cublas_runtime.h"
#include "common/cuda_check.cuh"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/svm.h"

namespace svm::cuda {

[[noreturn]] void throw_cublas(cublasStatus_t status, const char* what, const char* file, int line);

#define SVM_CUBLAS_CHECK(call)                                                             \
  do {                                                                                     \
    cublasStatus_t svm_status_ = (call);                                                   \
    if (svm_status_ != CUBLAS_STATUS_SUCCESS)                                              \
      ::svm::cuda::throw_cublas(svm_status_, #call, __FILE__, __LINE__);                    \
  } while (0)

// ---- the host driver's knobs (tests use them to reach every path on small problems) ----------
struct FitOptions {
  // Bytes the kernel values may take (the whole matrix, or everything the working sets
  // allocate); < 0: what the device has free, less a reserve.
  int64_t kernel_bytes_limit = -1;
  // Keep the solver's gradient and flags in global memory even when shared memory holds them.
  bool state_in_global_memory = false;
  // The pairs to solve (libsvm's pair order numbers), for solve_pairs_gpu; empty: every pair.
  std::vector<int> pairs;
  // How the kernel values are held: automatic chooses (svm_gpu.cu, solve_each_C); the others
  // force one path, for the tests and the benchmarks that compare them.
  enum class Path { automatic, whole_matrix, working_set };
  Path path = Path::automatic;
  int working_set_lanes = 0;          // 0: as the memory allows (working_set_gpu.cuh)
  int working_set_size = 1024;
  int64_t working_set_cache_rows = 0;  // > 0: at most this many cached rows a lane (tests)
  bool working_set_float32 = false;   // float32 rows instead of float16 (the precision benchmark)
};

}  // namespace svm::cuda

namespace svm {
// Rows on the device sorted by class (class_sorted_places), ld = device_row_stride(dim)
// floats apart, the columns past dim zero: what the solver reads. preprocess.h names it.
struct DeviceRows {
  cae::cuda::DeviceBuffer<float> X;  // [n, ld]
  int64_t n = 0;
  int dim = 0;
  int64_t ld = 0;
  double seconds = 0;  // what preparing them took (prepare_training_rows_gpu), for the fit's log
  std::future<void> unlocked;  // the host rows' page lock, released beside the GPU's work
};
}  // namespace svm

namespace svm::cuda {

// An owning CUDA stream (non-blocking), so that an exception anywhere frees it.
class Stream {
 public:
  Stream() { AE_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { AE_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

// An owning cuBLAS handle on `stream` (and Stream above), so that an exception anywhere frees
// everything.
class Blas {
 public:
  explicit Blas(cudaStream_t stream) {
    SVM_CUBLAS_CHECK(api_.create(&h_));
    SVM_CUBLAS_CHECK(api_.set_stream(h_, stream));
    // Plain FP32 products (no TF32) unless a caller asks for the tensor cores (svm_gpu.cu,
    // dots_rowmajor with split rows).
    SVM_CUBLAS_CHECK(api_.set_math_mode(h_, CUBLAS_DEFAULT_MATH));
  }
  ~Blas() { api_.destroy(h_); }
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  cublasHandle_t get() const { return h_; }

 private:
  const cae::cublas::Api& api_ = cae::cublas::api();  // loaded on first use (common/cublas_runtime.h)
  cublasHandle_t h_ = nullptr;
};

// Host rows [n, dim] (dense) to dst as [n, ld] (device_row_stride), the columns past dim zero.
void upload_rows(float* dst, const float* src, int64_t n, int dim, int64_t ld, cudaStream_t s);

// The most rows the automatic choice gives the whole matrix (docs/DECISIONS.md, "The GPU
// SVM's working sets"): working sets were as fast at 50,000 x 8,192 and twice as fast at
// 100,000 x 1,024.
constexpr int64_t kWholeMatrixMaxRows = 65536;

// What the device has free now, and what the SVM's allocations leave of it for cuBLAS's
// workspace and slack.
inline int64_t free_device_bytes() {
  size_t free_b = 0, total_b = 0;
  AE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(free_b);
}
constexpr int64_t kDeviceReserveBytes = int64_t{768} << 20;

// Where row r of y goes when the rows are sorted by class: classes ascending, each class's
// rows in training order (begin_fit's members, one after another).
std::vector<int64_t> class_sorted_places(const int32_t* y, int64_t n);

struct FitStats {
  std::string mode;            // "whole-matrix" or "working-set"
  std::string detail;          // working-set: the rows' type, lanes, rounds, rows computed
  // setup: CUDA context, stream and cuBLAS handle; assemble: the libsvm layout on the host.
  double setup_s = 0, upload_s = 0, kernel_s = 0, smo_s = 0, assemble_s = 0, total_s = 0;
  std::vector<int64_t> pair_iterations;
  std::vector<double> pair_objective;  // dual objective ½aᵀQa − eᵀa of each pair
  int pairs_hit_limit = 0;
  int64_t working_set_rounds = 0, working_set_rows = 0;
  int working_set_lanes = 0;
  int64_t working_set_cache_rows = 0;  // a lane's, for the largest pair
  bool working_set_half = false;
};

Model fit(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, const PairCallback& cb,
          const FitOptions& options, FitStats* stats);
// fit() on rows prepare_training_rows_gpu left on the device (their split for the tensor
// cores spends them: one fit); the support vectors come from the raw host rows X [n, raw_dim]
// through `prepared` (scaled_kept_rows).
Model fit_prepared(DeviceRows& rows, RawRows X, const int32_t* y, int64_t n, int raw_dim,
                   const PreparedRows& prepared, const FitParams& p, const PairCallback& cb, const FitOptions& options,
                   FitStats* stats);
// fit_one_class_gpu (svm.h) with a choice of path (options.path; the other options are the
// C-SVC's).
Model fit_one_class(const float* X, int64_t n, int dim, const FitParams& p, const FitOptions& options);
// One model per C of `Cs` from one kernel matrix (p.C is ignored); `stats` describes the
// kernel matrix once and the solves of all C together (pair lists: the last C's).
std::vector<Model> fit_each_C(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                              const std::vector<double>& Cs, const PairCallback& cb, const FitOptions& options,
                              FitStats* stats);

// ---- device kernels (launchers; all asynchronous on `stream`) ---------------------------------

// The row stride of rows on the device: dim rounded up to 32 floats (128 bytes), the columns
// past dim zero. cuBLAS's tensor-core GEMMs need rows that start on 16-byte boundaries; with
// an odd stride it falls back to slower kernels (docs/SVM_GPU.md, "Kernel matrix").
// The zero columns add exact zeros to every dot product and norm.
int64_t device_row_stride(int dim);

// out[r] = |X[r, :dim]|² in double; rows ld floats apart.
void row_squared_norms(const float* X, int64_t n, int dim, int64_t ld, double* out, cudaStream_t stream);
// x[i] = its nearest TF32 value hi, lo[i] = the TF32 value nearest to the rest (x − hi): the
// operands of the three TF32 products that give float32-accurate dot products (svm_gpu.cu, dots).
void split_tf32(float* x, float* lo, int64_t count, cudaStream_t stream);
// ---- prepare_training_rows on the device (prepare_gpu.cu; each the CPU's arithmetic, sums
// in its order) ----
// X [n, dim] scaled in place as apply_scaler does; differs[f] = 1 where a row's scaled value
// differs from scaled_row0[f] (differs zeroed by the caller); row_sum[r] = Σ_f X'[r, f] in
// column order.
void scale_rows(float* X, int64_t n, int dim, const double* mean, const double* scale, const float* scaled_row0,
                uint8_t* differs, double* row_sum, cudaStream_t stream);
// row_sum[r] = Σ_f (X[r, f] − mean)² in column order, in double.
void squared_deviation_sums(const float* X, int64_t n, int dim, double mean, double* row_sum, cudaStream_t stream);
// out[i] = the float of in[i] (float16), i < count: rows that went up as halves.
void widen_halves(const cae::Half* in, float* out, int64_t count, cudaStream_t stream);
// out[places[r], i] = X[r, kept[i]] for i < count (X dense, [n, dim]), 0 for count ≤ i < ld.
void compact_rows(const float* X, const int64_t* places, int64_t n, int dim, const int* kept, int count, int64_t ld,
                  float* out, cudaStream_t stream);

// out[places[r], :dim] = X[r, :] for r < n (X dense, [n, dim]), and out[places[r], dim:ld] = 0.
void scatter_rows(const float* X, const int64_t* places, int64_t n, int dim, int64_t ld, float* out,
                  cudaStream_t stream);
// M [m x m], row stride ld, holds dot products in its upper triangle (row <= column). Turns
// them into kernel values (rbf: exp(-gamma * max(0, |a|² + |b|² - 2 a.b)) in double, stored
// as float; diagonal exactly 1) and mirrors them into the lower triangle.
void symmetric_kernel_from_dots(float* M, int64_t m, int64_t ld, const double* norms, KernelType kernel,
                                double gamma, cudaStream_t stream);
// diag[t] = M[t, t].
void extract_diagonal(const float* M, int64_t m, int64_t ld, double* diag, cudaStream_t stream);
// out[r, c] = (double)(float)K from dots [rows x cols] (same formula as above).
void kernel_from_dots(const float* dots, int64_t rows, int64_t cols, const double* row_norms,
                      const double* col_norms, KernelType kernel, double gamma, double* out, cudaStream_t stream);
// dec[x, p] = T[x, a, b-1] + T[x, b, a] - rho[p] for pair p = (a, b); T is [rows, k, k-1].
// out[t] = Σ_{s < count} w[s] K[t, s] for t < n (K row-major, ld), summed in s order in
// double: the one-class start's gradient, as the CPU solver computes it.
void weighted_row_sums(const float* K, int64_t n, int64_t ld, const double* w, int64_t count, double* out,
                       cudaStream_t stream);
void combine_decisions(const double* T, int64_t rows, int k, const double* rho, double* dec, cudaStream_t stream);

// One binary problem for the SMO kernel: class a (+1) then class b (-1), in training order.
// Sample t of the pair is row/column map(t) of the matrix K, where map(t) = off_a + t for
// t < na and off_b + (t - na) after.
struct PairJob {
  const float* K = nullptr;
  int64_t ld = 0;
  const double* diag = nullptr;  // indexed by map(t); unused for rbf (diagonal is 1)
  int64_t off_a = 0, off_b = 0;
  int na = 0, nb = 0;
  double weight_a = 1, weight_b = 1;  // class a's and b's bound: C times these (libsvm's -wi)
  double* alpha = nullptr;    // [na + nb] out; also the solver's alpha when shared memory does not hold it
  double* G = nullptr;        // [na + nb] gradient, used when shared memory does not hold the state
  uint8_t* status = nullptr;  // [na + nb] flags, likewise
  // null: the C-SVC start, alpha = 0 and G = −1. Otherwise the solve starts from the alphas
  // already in `alpha` with this gradient (the one-class problem, from libsvm's start); it may
  // be `G` itself.
  const double* G_start = nullptr;
  double linear = -1;  // the dual's linear term, for the objective: −1 (C-SVC), 0 (one-class)
  // > 0: this job's stopping gap and step limit instead of the launch's (a working set's
  // subproblem, cuda/working_set_gpu.cu).
  double tol = 0;
  long long max_iter = 0;
};

struct PairResult {
  double rho;
  double objective;
  long long iterations;
  int hit_iteration_limit;
  int n_free;
};

// Shared memory one block needs to keep the state of a pair of n samples on chip.
size_t smo_state_bytes(int64_t n);
// Runs every job of `jobs` (device array) in its own block; results to `results` (device).
// smem_bytes: dynamic shared memory per block (0: all state in global memory); largest_pair:
// the most samples a job has; max_iter <= 0: the CPU solver's limit, max(10^7, 100 n).
void solve_pairs(const PairJob* jobs, int n_jobs, PairResult* results, double C, double tol, long long max_iter,
                 bool unit_diagonal, size_t smem_bytes, int64_t largest_pair, cudaStream_t stream);
// The largest dynamic shared memory solve_pairs may be given on this device.
size_t smo_max_shared_bytes();

}  // namespace svm::cuda
