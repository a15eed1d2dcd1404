// svm::fit_gpu and svm::decision_values_gpu: the host side of the GPU SVM (design and
// reasoning in docs/SVM_GPU.md; device code in svm_gpu_kernels.cu).
//
// fit: rows sorted by class on the device → squared norms → kernel matrix from cuBLAS SGEMM
// (upper block triangle, then exp + mirror) → one SMO block per one-vs-one pair → alphas
// back to the host → libsvm's model layout (svm::assemble_model, shared with fit_cpu).
// decision values: per row block, SGEMM against the support vectors → kernel values in
// double → per class, one DGEMM with that class's dual coefficients → per pair, two terms
// minus rho.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "common/log.h"
#include "common/timer.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/cuda/working_set_gpu.cuh"
#include "kernels/svm/svm.h"

namespace svm {
namespace cuda {

using cae::cuda::DeviceBuffer;
using cae::cuda::PinnedRange;

namespace {

template <typename T>
void upload(DeviceBuffer<T>& dst, const T* src, size_t count, cudaStream_t stream) {
  dst.resize(std::max<size_t>(count, 1));
  if (count) AE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src, count * sizeof(T), cudaMemcpyHostToDevice, stream));
}

// Rows on the device, ld floats apart (device_row_stride: the columns past the features are
// zero): float32 as given (lo null), or as split_tf32 leaves them, x = hi + lo with both TF32
// values (split_rows).
struct Rows {
  const float* hi;
  const float* lo;
  int64_t ld;
  Rows from(int64_t row) const { return {hi + row * ld, lo ? lo + row * ld : nullptr, ld}; }
};

// Splits the rows [n, ld] of `x` in place (x becomes hi) into x and `lo` (grown to fit); the
// zero columns stay zero in both.
Rows split_rows(float* x, int64_t n, int64_t ld, DeviceBuffer<float>& lo, cudaStream_t s) {
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(ld);
  lo.resize(std::max<size_t>(count, 1));
  split_tf32(x, lo.get(), static_cast<int64_t>(count), s);
  return {x, lo.get(), ld};
}

// Row-major C[rows_i, cols_j] (row stride ldc) = A_i · B_jᵀ, A_i: [rows_i, ld], B_j: [cols_j, ld],
// over all ld columns: the zero ones add exact zeros, and a depth that is a multiple of 32
// keeps cuBLAS on its aligned kernels. Float32 rows: one SGEMM in true FP32. Split rows: three
// GEMMs on the TF32 tensor cores, A·Bᵀ ≈ A_lo·B_hiᵀ + A_hi·B_loᵀ + A_hi·B_hiᵀ (the small terms
// first; the dropped A_lo·B_loᵀ is ~2^-22 of a product), ~2x the SGEMM's speed on a Hopper GPU.
// Each product is as exact as float32's, but the tensor cores add them with truncation, an
// error of up to ~2^-24 of the running sum per 8 products that does not average out: ~1e-4 of
// a large dot of 8,192 terms where float32's rounding leaves ~1e-5 (docs/SVM_GPU.md, "Kernel
// matrix").
void dots_rowmajor(cublasHandle_t h, Rows A, int64_t rows, Rows B, int64_t cols, float* C, int64_t ldc) {
  if (rows == 0 || cols == 0) return;
  if (A.ld != B.ld) throw std::invalid_argument("dots_rowmajor: rows of different strides");
  const int depth = static_cast<int>(A.ld);
  const cae::cublas::Api& blas = cae::cublas::api();
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: C(r=j, c=i) = B_j · A_i, i.e. op(B)=Bᵀ [cols x ld] times A [ld x rows].
  auto gemm = [&](const float* b, const float* a, const float* beta) {
    SVM_CUBLAS_CHECK(blas.sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(cols), static_cast<int>(rows), depth, &one,
                                b, depth, a, depth, beta, C, static_cast<int>(ldc)));
  };
  if (!A.lo || !B.lo) return gemm(B.hi, A.hi, &zero);
  SVM_CUBLAS_CHECK(blas.set_math_mode(h, CUBLAS_TF32_TENSOR_OP_MATH));
  gemm(B.hi, A.lo, &zero);
  gemm(B.lo, A.hi, &one);
  gemm(B.hi, A.hi, &one);
  SVM_CUBLAS_CHECK(blas.set_math_mode(h, CUBLAS_DEFAULT_MATH));
}

// K [n, n] (row-major, ld n) of the rows X: GEMM tiles of the upper block triangle, then
// exp and mirror; its diagonal to d_diag.
void build_kernel_matrix(cublasHandle_t blas, Rows X, int64_t n, const double* d_norms, const FitParams& p,
                         float* d_K, double* d_diag, cudaStream_t s) {
  constexpr int64_t kTile = 4096;  // multiple of 32 (the mirror pass's tile)
  for (int64_t i0 = 0; i0 < n; i0 += kTile)
    for (int64_t j0 = i0; j0 < n; j0 += kTile)
      dots_rowmajor(blas, X.from(i0), std::min(kTile, n - i0), X.from(j0), std::min(kTile, n - j0), d_K + i0 * n + j0,
                    n);
  symmetric_kernel_from_dots(d_K, n, n, d_norms, p.kernel, p.gamma, s);
  extract_diagonal(d_K, n, n, d_diag, s);
}

}  // namespace

void upload_rows(float* dst, const float* src, int64_t n, int dim, int64_t ld, cudaStream_t s) {
  if (n <= 0) return;
  const size_t width = static_cast<size_t>(dim) * sizeof(float), pitch = static_cast<size_t>(ld) * sizeof(float);
  if (ld > dim)
    AE_CUDA_CHECK(cudaMemset2DAsync(dst + dim, pitch, 0, pitch - width, static_cast<size_t>(n), s));
  AE_CUDA_CHECK(cudaMemcpy2DAsync(dst, pitch, src, width, width, static_cast<size_t>(n), cudaMemcpyHostToDevice, s));
}

Model fit(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, const PairCallback& cb,
          const FitOptions& options, FitStats* stats) {
  return std::move(fit_each_C(X, y, n, dim, p, {p.C}, cb, options, stats).front());
}

std::vector<int64_t> class_sorted_places(const int32_t* y, int64_t n) {
  std::vector<int32_t> classes(y, y + n);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  std::vector<int64_t> next(classes.size() + 1, 0), place(static_cast<size_t>(n));
  auto class_of = [&](int32_t label) { return std::lower_bound(classes.begin(), classes.end(), label) - classes.begin(); };
  for (int64_t r = 0; r < n; ++r) ++next[static_cast<size_t>(class_of(y[r]) + 1)];
  for (size_t c = 1; c < next.size(); ++c) next[c] += next[c - 1];  // class c's first place
  for (int64_t r = 0; r < n; ++r) place[static_cast<size_t>(r)] = next[static_cast<size_t>(class_of(y[r]))]++;
  return place;
}

namespace {

// Host rows [n, dim] on the device sorted by class (class_sorted_places), ld floats apart:
// they go up in chunks of ≤ 256 MB through a staging buffer and are scattered to their
// places, so the device never holds X twice (300,000 rows of a 16,384-d code are 19.7 GB).
// Rows the device cannot hold are refused before anything is allocated, with the number that
// would fit: each row as uploaded (float32) and its float16 copy beside it while the working
// sets' rows are made (prepare_working_set_rows), and its norm.
void require_rows_fit(int64_t n, int dim) {
  const int64_t per_row = device_row_stride(dim) * int64_t{sizeof(float) + sizeof(__half)} + int64_t{sizeof(double)};
  const int64_t room = std::max<int64_t>(free_device_bytes() - 2 * kDeviceReserveBytes, 0);
  if (n * per_row <= room) return;
  throw std::runtime_error("svm gpu: " + std::to_string(n) + " training rows of " + std::to_string(dim) +
                           " features need " + std::to_string((n * per_row) >> 20) + " MB of GPU memory, " +
                           std::to_string(room >> 20) + " MB are free: at most " + std::to_string(room / per_row) +
                           " rows of this width fit (--train-limit, fewer --augment views, or --device cpu)");
}

void upload_sorted_rows(const float* X, const int32_t* y, int64_t n, int dim, DeviceRows& rows, cudaStream_t s) {
  require_rows_fit(n, dim);
  rows.n = n;
  rows.dim = dim;
  rows.ld = device_row_stride(dim);
  const std::vector<int64_t> place = class_sorted_places(y, n);
  DeviceBuffer<int64_t> d_place;
  upload(d_place, place.data(), place.size(), s);
  rows.X.resize(std::max<size_t>(static_cast<size_t>(n * rows.ld), 1));
  const PinnedRange pinned(X, static_cast<size_t>(n) * dim * sizeof(float));
  const int64_t chunk = std::max<int64_t>(1, (int64_t{256} << 20) / (int64_t{dim} * int64_t{sizeof(float)}));
  DeviceBuffer<float> d_stage(static_cast<size_t>(std::max<int64_t>(std::min(chunk, n), 1)) * dim);
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t count = std::min(chunk, n - r0);
    AE_CUDA_CHECK(cudaMemcpyAsync(d_stage.get(), X + r0 * dim, static_cast<size_t>(count) * dim * sizeof(float),
                                  cudaMemcpyHostToDevice, s));
    scatter_rows(d_stage.get(), d_place.get() + r0, count, dim, rows.ld, rows.X.get(), s);
  }
  AE_CUDA_CHECK(cudaStreamSynchronize(s));
}

// The pairs a fit solves and where their rows lie: rows sorted by class (class_sorted_places),
// class c occupies [start[c], start[c+1]); pair q is classes pair_a[q] < pair_b[q], its
// multipliers at [pair_offset[q], pair_offset[q+1]) of the concatenated alpha arrays.
struct PairLayout {
  std::vector<int64_t> start;
  std::vector<int> pair_index, pair_a, pair_b;  // pair_index: libsvm's pair order numbers
  std::vector<int64_t> pair_offset;
  int size() const { return static_cast<int>(pair_index.size()); }
  int rows_of_class(int c) const { return static_cast<int>(start[c + 1] - start[c]); }
};

PairLayout lay_out_pairs(const std::vector<std::vector<int64_t>>& members, const std::vector<int>& pairs) {
  const int k = static_cast<int>(members.size());
  PairLayout L;
  L.start.assign(k + 1, 0);
  for (int c = 0; c < k; ++c) L.start[c + 1] = L.start[c] + static_cast<int64_t>(members[c].size());
  const int all_pairs = k * (k - 1) / 2;
  L.pair_index = pairs;  // the solved pairs: options.pairs, or every pair
  if (L.pair_index.empty()) {
    L.pair_index.resize(static_cast<size_t>(all_pairs));
    std::iota(L.pair_index.begin(), L.pair_index.end(), 0);
  }
  std::vector<int> first_of(all_pairs), second_of(all_pairs);
  for (int a = 0, q = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++q) first_of[q] = a, second_of[q] = b;
  const int P = L.size();
  L.pair_a.resize(P);
  L.pair_b.resize(P);
  L.pair_offset.assign(P + 1, 0);
  for (int q = 0; q < P; ++q) {
    if (L.pair_index[q] < 0 || L.pair_index[q] >= all_pairs)
      throw std::invalid_argument("svm: pair " + std::to_string(L.pair_index[q]) + " of " + std::to_string(all_pairs));
    L.pair_a[q] = first_of[L.pair_index[q]];
    L.pair_b[q] = second_of[L.pair_index[q]];
    L.pair_offset[q + 1] = L.pair_offset[q] + L.rows_of_class(L.pair_a[q]) + L.rows_of_class(L.pair_b[q]);
  }
  return L;
}

// What the solves leave: per C, each solved pair's result and alphas.
struct Solved {
  Model m;
  std::vector<std::vector<int64_t>> members;
  PairLayout layout;
  std::vector<std::vector<PairResult>> results;
  std::vector<std::vector<double>> alpha_all;
};

// The device memory a strategy may allocate: what is free less a reserve (measured by the
// strategy once it holds its own state), within the tests' FitOptions::kernel_bytes_limit.
int64_t device_budget(const FitOptions& options) {
  const int64_t free = std::max<int64_t>(free_device_bytes() - kDeviceReserveBytes, 0);
  return options.kernel_bytes_limit >= 0 ? std::min(options.kernel_bytes_limit, free) : free;
}

// svm-fit --cache-mb on the GPU (FitParams::gpu_cache_mb) bounds the kernel values held, as
// on the CPU: the whole matrix, or the working sets' cached rows; < 0: no bound of its own.
int64_t kernel_cache_bytes(const FitParams& p) { return p.gpu_cache_mb > 0 ? p.gpu_cache_mb << 20 : -1; }

// The working-set solver's settings for the problem p, from the knobs of `options`.
WorkingSetConfig working_set_config(const FitParams& p, const FitOptions& options) {
  WorkingSetConfig config;
  config.working_set_size = options.working_set_size;
  config.lanes = options.working_set_lanes;
  config.cache_rows = options.working_set_cache_rows;
  config.cache_bytes = kernel_cache_bytes(p);
  config.budget_bytes = device_budget(options);
  config.tol = p.tol;
  config.kernel = p.kernel;
  config.gamma = p.gamma;
  return config;
}

// The path (docs/SVM_GPU.md, "Which path"), unless `options` force one: the whole matrix for a
// problem as small as CIFAR-10's 50,000 rows, where it fits beside `state_bytes` of solver
// state and within --cache-mb; working sets otherwise — they compute only the rows the
// solver visits and hold no pair's matrix.
bool whole_matrix_chosen(int64_t n, int64_t state_bytes, const FitParams& p, const FitOptions& options) {
  using Path = FitOptions::Path;
  if (options.path != Path::automatic) return options.path == Path::whole_matrix;
  const int64_t matrix_bytes = n * n * int64_t{sizeof(float)}, cache = kernel_cache_bytes(p);
  return n <= kWholeMatrixMaxRows && matrix_bytes + state_bytes <= device_budget(options) &&
         (cache < 0 || matrix_bytes <= cache);
}

// What both strategies are given: the class-sorted rows on the device, the pairs, the
// problem and the device memory they may use (device_budget).
struct SolveContext {
  cublasHandle_t blas;
  Stream& stream;
  DeviceRows& rows;
  const PairLayout& layout;
  const Model& m;
  const FitParams& p;
  const std::vector<double>& Cs;
  const PairCallback& cb;
  const FitOptions& options;
  int64_t budget() const { return device_budget(options); }
};

// The rows as the working sets read them (docs/SVM_GPU.md, "Kernel values in working sets"):
// float16 for the tensor cores, their norms from the rounded values so every distance is that
// of the rows the GEMM sees; where a value exceeds float16's range, or float32 is asked for,
// the float32 rows in true FP32. Float16 rows spend the float32 ones, as the TF32 split does.
struct WorkingSetRowsOnDevice {
  DeviceBuffer<__half> X16;
  DeviceBuffer<double> norms;
  WorkingSetRows view;
};
void prepare_working_set_rows(DeviceRows& rows, bool float32, Stream& stream, WorkingSetRowsOnDevice& out) {
  const int64_t n = rows.n, ld = rows.ld;
  const cudaStream_t s = stream.get();
  bool half = !float32;
  if (half) {
    DeviceBuffer<int> d_overflow(1);
    AE_CUDA_CHECK(cudaMemsetAsync(d_overflow.get(), 0, sizeof(int), s));
    out.X16.resize(static_cast<size_t>(std::max<int64_t>(n * ld, 1)));
    rows_to_half(rows.X.get(), n * ld, out.X16.get(), d_overflow.get(), s);
    int overflow = 0;
    AE_CUDA_CHECK(cudaMemcpyAsync(&overflow, d_overflow.get(), sizeof(int), cudaMemcpyDeviceToHost, s));
    stream.sync();
    half = overflow == 0;
    if (half)
      rows.X.release();
    else
      out.X16.release();
  }
  out.norms.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  if (half)
    half_row_squared_norms(out.X16.get(), n, rows.dim, ld, out.norms.get(), s);
  else
    row_squared_norms(rows.X.get(), n, rows.dim, ld, out.norms.get(), s);
  stream.sync();
  out.view.X16 = half ? out.X16.get() : nullptr;
  out.view.X32 = half ? nullptr : rows.X.get();
  out.view.ld = ld;
  out.view.norms = out.norms.get();
}

// The whole kernel matrix over the class-sorted rows, once; each C solves every pair on it,
// one SMO block per pair, from alpha = 0 as a plain fit would.
void solve_by_whole_matrix(const SolveContext& x, Solved& out, FitStats& st) {
  const PairLayout& L = x.layout;
  const int pairs = L.size();
  const int64_t n = x.rows.n, ld = x.rows.ld;
  const cudaStream_t s = x.stream.get();
  st.mode = "whole-matrix";
  cae::Stopwatch clock;
  DeviceBuffer<double> d_norms(static_cast<size_t>(n));
  row_squared_norms(x.rows.X.get(), n, x.rows.dim, ld, d_norms.get(), s);  // of the rows as given, before a split
  const int64_t state_total = L.pair_offset[pairs];
  DeviceBuffer<double> d_alpha(static_cast<size_t>(state_total)), d_G(static_cast<size_t>(state_total));
  DeviceBuffer<uint8_t> d_status(static_cast<size_t>(state_total));
  DeviceBuffer<PairJob> d_jobs(static_cast<size_t>(pairs));
  DeviceBuffer<PairResult> d_results(static_cast<size_t>(pairs));
  const int64_t budget = x.budget();
  const int64_t whole_bytes = n * n * static_cast<int64_t>(sizeof(float)) + n * static_cast<int64_t>(sizeof(double));
  if (whole_bytes > budget) throw std::runtime_error("svm gpu: the whole kernel matrix does not fit");
  // An RBF kernel's dot products on the tensor cores (split rows), where the rows' low
  // parts fit beside the matrix: its values move by ~1e-4 of themselves at most (γ·|a|·|b|
  // ~ 1 for γ = scale), which the solver's tolerance absorbs. A linear kernel's values are
  // the dots themselves: it keeps true FP32.
  const int64_t lo_bytes = n * ld * static_cast<int64_t>(sizeof(float));
  DeviceBuffer<float> d_X_lo;
  const Rows X_rows = x.p.kernel == KernelType::rbf && whole_bytes + lo_bytes <= budget
                          ? split_rows(x.rows.X.get(), n, ld, d_X_lo, s)
                          : Rows{x.rows.X.get(), nullptr, ld};
  DeviceBuffer<float> d_K(static_cast<size_t>(n) * static_cast<size_t>(n));
  DeviceBuffer<double> d_diag(static_cast<size_t>(n));
  build_kernel_matrix(x.blas, X_rows, n, d_norms.get(), x.p, d_K.get(), d_diag.get(), s);
  x.stream.sync();
  st.kernel_s = clock.seconds();

  clock = cae::Stopwatch();
  std::vector<PairJob> jobs(pairs);
  for (int q = 0; q < pairs; ++q) {
    const int a = L.pair_a[q], b = L.pair_b[q];
    PairJob& job = jobs[q];
    job.K = d_K.get();
    job.ld = n;
    job.diag = d_diag.get();
    job.off_a = L.start[a];
    job.off_b = L.start[b];
    job.na = L.rows_of_class(a);
    job.nb = L.rows_of_class(b);
    job.weight_a = class_weight(x.p.class_weight, x.m.classes[a]);
    job.weight_b = class_weight(x.p.class_weight, x.m.classes[b]);
    job.alpha = d_alpha.get() + L.pair_offset[q];
    job.G = d_G.get() + L.pair_offset[q];
    job.status = d_status.get() + L.pair_offset[q];
  }
  AE_CUDA_CHECK(cudaMemcpyAsync(d_jobs.get(), jobs.data(), sizeof(PairJob) * pairs, cudaMemcpyHostToDevice, s));
  int64_t largest = 0;
  for (int q = 0; q < pairs; ++q) largest = std::max(largest, L.pair_offset[q + 1] - L.pair_offset[q]);
  const size_t smem = x.options.state_in_global_memory ? 0 : std::min(smo_state_bytes(largest), smo_max_shared_bytes());
  const bool unit_diag = x.p.kernel == KernelType::rbf;
  for (size_t c = 0; c < x.Cs.size(); ++c) {
    // The device state is reused by the next C: each C's results and alphas are copied out.
    solve_pairs(d_jobs.get(), pairs, d_results.get(), x.Cs[c], x.p.tol, 0, unit_diag, smem, largest, s);
    AE_CUDA_CHECK(cudaMemcpyAsync(out.results[c].data(), d_results.get(), sizeof(PairResult) * pairs,
                                  cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(out.alpha_all[c].data(), d_alpha.get(), sizeof(double) * state_total,
                                  cudaMemcpyDeviceToHost, s));
  }
  x.stream.sync();
  st.smo_s = clock.seconds();
  if (x.cb)
    for (int q = 0; q < pairs; ++q) x.cb(q + 1, pairs);
}

// Working sets (working_set_gpu.cuh): no pair's matrix is held; each C solves every pair
// from alpha = 0.
void solve_by_working_sets(const SolveContext& x, Solved& out, FitStats& st) {
  const PairLayout& L = x.layout;
  const int pairs = L.size();
  DeviceRows& rows = x.rows;
  const cudaStream_t s = x.stream.get();
  st.mode = "working-set";
  cae::Stopwatch clock;
  WorkingSetRowsOnDevice ws_rows;
  prepare_working_set_rows(rows, x.options.working_set_float32, x.stream, ws_rows);
  const bool half = ws_rows.view.X16 != nullptr;
  st.kernel_s = clock.seconds();
  st.working_set_half = half;
  WorkingSetConfig config = working_set_config(x.p, x.options);

  clock = cae::Stopwatch();
  WorkingSetTotals totals;
  const size_t nC = x.Cs.size();
  for (size_t c = 0; c < nC; ++c) {
    std::vector<WorkingSetPair> ws_pairs(static_cast<size_t>(pairs));
    for (int q = 0; q < pairs; ++q) {
      const int a = L.pair_a[q], b = L.pair_b[q];
      WorkingSetPair& wp = ws_pairs[q];
      wp.start_a = L.start[a];
      wp.start_b = L.start[b];
      wp.na = L.rows_of_class(a);
      wp.nb = L.rows_of_class(b);
      wp.Cp = x.Cs[c] * class_weight(x.p.class_weight, x.m.classes[a]);
      wp.Cn = x.Cs[c] * class_weight(x.p.class_weight, x.m.classes[b]);
    }
    config.budget_bytes = x.budget();
    const std::vector<WorkingSetOutcome> solved = solve_working_sets(
        x.blas, ws_rows.view, ws_pairs, config, s, [&](int done) { if (x.cb && c + 1 == nC) x.cb(done, pairs); }, &totals);
    for (int q = 0; q < pairs; ++q) {
      out.results[c][q] = solved[q].result;
      std::copy(solved[q].alpha.begin(), solved[q].alpha.end(), out.alpha_all[c].begin() + L.pair_offset[q]);
    }
  }
  st.smo_s = clock.seconds();
  st.working_set_rounds = totals.rounds;
  st.working_set_rows = totals.rows_computed;
  st.working_set_lanes = totals.lanes;
  st.working_set_cache_rows = totals.cache_rows_per_lane;
  char detail[256];
  std::snprintf(detail, sizeof(detail),
                "%s rows, %d lanes of %lld cached rows, %lld rounds, %lld kernel rows, %lld float64 gradients "
                "over %lld multipliers' changes",
                half ? "float16" : "float32", totals.lanes, static_cast<long long>(totals.cache_rows_per_lane),
                static_cast<long long>(totals.rounds), static_cast<long long>(totals.rows_computed),
                static_cast<long long>(totals.refreshes), static_cast<long long>(totals.refreshed_columns));
  st.detail = detail;
}

// Every C of `Cs` on one upload of the rows: X's, uploaded here, or `prepared` (the same rows,
// already on the device; the strategies spend them).
Solved solve_each_C(const float* X, DeviceRows* prepared, const int32_t* y, int64_t n, int dim, const FitParams& p,
                    const std::vector<double>& Cs, const PairCallback& cb, const FitOptions& options, FitStats& st) {
  if (Cs.empty()) throw std::invalid_argument("svm: no C to fit");
  if (prepared && (prepared->n != n || prepared->dim != dim))
    throw std::invalid_argument("svm: prepared rows of another shape than the fit's");
  st = FitStats{};
  Solved out;
  out.m = begin_fit(y, n, dim, p, out.members);
  out.layout = lay_out_pairs(out.members, options.pairs);
  const PairLayout& L = out.layout;
  const int pairs = L.size();
  out.results.assign(Cs.size(), std::vector<PairResult>(static_cast<size_t>(pairs)));
  out.alpha_all.assign(Cs.size(), std::vector<double>(static_cast<size_t>(L.pair_offset[pairs])));

  cae::Stopwatch clock;
  Stream stream;
  Blas blas(stream.get());
  st.setup_s = clock.seconds();
  clock = cae::Stopwatch();
  DeviceRows uploaded;
  if (!prepared) upload_sorted_rows(X, y, n, dim, uploaded, stream.get());
  DeviceRows& rows = prepared ? *prepared : uploaded;
  st.upload_s = clock.seconds() + (prepared ? prepared->seconds : 0.0);

  const SolveContext context{blas.get(), stream, rows, L, out.m, p, Cs, cb, options};
  const int64_t state_bytes = n * int64_t{sizeof(double)} + L.pair_offset[pairs] * 17 +
                              pairs * int64_t{sizeof(PairJob) + sizeof(PairResult)};
  if (whole_matrix_chosen(n, state_bytes, p, options))
    solve_by_whole_matrix(context, out, st);
  else
    solve_by_working_sets(context, out, st);
  return out;
}

// C number c's solutions, one per solved pair, for assemble_model.
std::vector<PairSolution> solutions_of(const Solved& sv, size_t c) {
  std::vector<PairSolution> out;
  for (size_t q = 0; q < sv.layout.pair_index.size(); ++q) {
    PairSolution sol;
    sol.pair = sv.layout.pair_index[q];
    const auto& alpha = sv.alpha_all[c];
    sol.alpha.assign(alpha.begin() + sv.layout.pair_offset[q], alpha.begin() + sv.layout.pair_offset[q + 1]);
    sol.rho = sv.results[c][q].rho;
    sol.iterations = sv.results[c][q].iterations;
    sol.hit_iteration_limit = sv.results[c][q].hit_iteration_limit != 0;
    out.push_back(std::move(sol));
  }
  return out;
}

// fit_each_C on X (uploaded here) or on `prepared` rows; `assemble` turns each C's solutions
// into a model (assemble_model, or the layout and rows of a GPU-prepared fit).
using Assemble = std::function<Model(std::vector<PairSolution>)>;
std::vector<Model> fit_models(const float* X, DeviceRows* prepared, const int32_t* y, int64_t n, int dim,
                              const FitParams& p, const std::vector<double>& Cs, const PairCallback& cb,
                              const FitOptions& options, FitStats* stats, const Assemble& assemble) {
  if (!options.pairs.empty()) throw std::invalid_argument("fit_each_C: a whole fit solves every pair");
  cae::Stopwatch total_clock;
  FitStats local_stats;
  FitStats& st = stats ? *stats : local_stats;
  Solved sv = solve_each_C(X, prepared, y, n, dim, p, Cs, cb, options, st);
  const int pairs = static_cast<int>(sv.layout.pair_index.size());
  cae::Stopwatch clock;
  std::vector<Model> models;
  for (size_t c = 0; c < Cs.size(); ++c) {
    st.pair_iterations.clear();
    st.pair_objective.clear();
    for (int q = 0; q < pairs; ++q) {
      const PairResult& r = sv.results[c][q];
      st.pair_iterations.push_back(r.iterations);
      st.pair_objective.push_back(r.objective);
      if (r.hit_iteration_limit) {
        ++st.pairs_hit_limit;
        cae::log_warn("svm: pair (%d,%d) reached the iteration limit before tol %g", sv.m.classes[sv.layout.pair_a[q]],
                      sv.m.classes[sv.layout.pair_b[q]], p.tol);
      }
    }
    models.push_back(assemble(solutions_of(sv, c)));
  }
  st.assemble_s = clock.seconds();
  st.total_s = total_clock.seconds();
  if (p.log_summary) {
    const Model& last = models.back();
    const int64_t most_iterations = *std::max_element(st.pair_iterations.begin(), st.pair_iterations.end());
    int64_t iterations = 0;
    for (int64_t it : st.pair_iterations) iterations += it;
    if (st.mode == "working-set")
      cae::log_info("svm (gpu, working sets: %s): %d pairs: setup %.2f s, %s %.2f s, rows made %.2f s, "
                    "solve %.2f s (%lld SMO steps, at most %lld in a pair), model %.2f s; %lld support vectors",
                    st.detail.c_str(), pairs, st.setup_s, prepared ? "rows prepared" : "upload", st.upload_s,
                    st.kernel_s, st.smo_s, static_cast<long long>(iterations), static_cast<long long>(most_iterations),
                    st.assemble_s, static_cast<long long>(last.n_sv()));
    else
      cae::log_info("svm (gpu, %s): %d pairs: setup %.2f s, %s %.2f s, kernel matrix %.2f s, "
                    "SMO %.2f s (%lld iterations, at most %lld in a pair), model %.2f s; %lld support vectors",
                    st.mode.c_str(), pairs, st.setup_s, prepared ? "rows prepared" : "upload", st.upload_s,
                    st.kernel_s, st.smo_s, static_cast<long long>(iterations), static_cast<long long>(most_iterations),
                    st.assemble_s, static_cast<long long>(last.n_sv()));
  }
  return models;
}

}  // namespace

std::vector<Model> fit_each_C(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                              const std::vector<double>& Cs, const PairCallback& cb, const FitOptions& options,
                              FitStats* stats) {
  return fit_models(X, nullptr, y, n, dim, p, Cs, cb, options, stats,
                    [&](std::vector<PairSolution> sols) { return assemble_model(X, y, n, dim, p, std::move(sols)); });
}

Model fit_prepared(DeviceRows& rows, RawRows X, const int32_t* y, int64_t n, int raw_dim,
                   const PreparedRows& prepared, const FitParams& p, const PairCallback& cb, const FitOptions& options,
                   FitStats* stats) {
  if (rows.dim != prepared.kept) throw std::invalid_argument("fit_gpu_prepared: rows of another preparation");
  const Assemble assemble = [&](std::vector<PairSolution> sols) {
    Model m = assemble_model_layout(y, n, rows.dim, p, std::move(sols));
    m.support_vectors.resize(static_cast<size_t>(m.n_sv() * rows.dim));
    scaled_kept_rows(prepared, X, raw_dim, m.support_indices.data(), m.n_sv(), m.support_vectors.data());
    return m;
  };
  return std::move(fit_models(nullptr, &rows, y, n, rows.dim, p, {p.C}, cb, options, stats, assemble).front());
}

}  // namespace cuda

namespace cuda {
namespace {

// The one-class dual on its whole kernel matrix, one SMO block; alpha in: libsvm's start.
PairResult one_class_by_whole_matrix(cublasHandle_t blas, DeviceRows& rows, const FitParams& p,
                                     std::vector<double>& alpha, Stream& stream) {
  const int64_t n = rows.n;
  const cudaStream_t s = stream.get();
  DeviceBuffer<double> d_norms(static_cast<size_t>(n)), d_diag(static_cast<size_t>(n));
  row_squared_norms(rows.X.get(), n, rows.dim, rows.ld, d_norms.get(), s);
  // True FP32: a one-class model's multipliers all add up (docs/SVM_GPU.md).
  DeviceBuffer<float> d_K(static_cast<size_t>(n) * static_cast<size_t>(n));
  build_kernel_matrix(blas, Rows{rows.X.get(), nullptr, rows.ld}, n, d_norms.get(), p, d_K.get(), d_diag.get(), s);
  // The start's gradient K·alpha (only the first ⌊νn⌋ + 1 alphas can be non-zero).
  const int64_t nonzero = std::min<int64_t>(n, static_cast<int64_t>(p.nu * static_cast<double>(n)) + 1);
  DeviceBuffer<double> d_alpha, d_G(static_cast<size_t>(n));
  upload(d_alpha, alpha.data(), alpha.size(), s);
  weighted_row_sums(d_K.get(), n, n, d_alpha.get(), nonzero, d_G.get(), s);
  DeviceBuffer<uint8_t> d_status(static_cast<size_t>(n));
  PairJob job;
  job.K = d_K.get();
  job.ld = n;
  job.diag = d_diag.get();
  job.off_a = 0;
  job.off_b = n;
  job.na = static_cast<int>(n);
  job.nb = 0;
  job.alpha = d_alpha.get();
  job.G = d_G.get();
  job.status = d_status.get();
  job.G_start = d_G.get();
  job.linear = 0;
  DeviceBuffer<PairJob> d_job;
  upload(d_job, &job, 1, s);
  DeviceBuffer<PairResult> d_result(1);
  const size_t smem = std::min(smo_state_bytes(n), smo_max_shared_bytes());
  // The bound of every alpha is 1: C = 1 with weight 1.
  solve_pairs(d_job.get(), 1, d_result.get(), 1.0, p.tol, 0, p.kernel == KernelType::rbf, smem, n, s);
  PairResult result;
  AE_CUDA_CHECK(cudaMemcpyAsync(&result, d_result.get(), sizeof(PairResult), cudaMemcpyDeviceToHost, s));
  AE_CUDA_CHECK(cudaMemcpyAsync(alpha.data(), d_alpha.get(), sizeof(double) * n, cudaMemcpyDeviceToHost, s));
  stream.sync();
  return result;
}

// The one-class dual by working sets: no n × n matrix, the rows as the C-SVC's working sets
// read them.
PairResult one_class_by_working_sets(cublasHandle_t blas, DeviceRows& rows, const FitParams& p,
                                     const FitOptions& options, std::vector<double>& alpha, Stream& stream) {
  WorkingSetRowsOnDevice ws_rows;
  prepare_working_set_rows(rows, options.working_set_float32, stream, ws_rows);
  WorkingSetPair problem;
  problem.na = static_cast<int>(rows.n);
  problem.Cp = problem.Cn = 1;
  problem.linear = 0;
  problem.start = alpha.data();
  const WorkingSetConfig config = working_set_config(p, options);
  std::vector<WorkingSetOutcome> solved =
      solve_working_sets(blas, ws_rows.view, {problem}, config, stream.get(), {}, nullptr);
  alpha = std::move(solved[0].alpha);
  return solved[0].result;
}

}  // namespace

Model fit_one_class(const float* X, int64_t n, int dim, const FitParams& p, const FitOptions& options) {
  Model m = begin_one_class_fit(n, dim, p);
  require_rows_fit(n, dim);
  cae::Stopwatch clock;
  Stream stream;
  Blas blas(stream.get());
  DeviceRows rows;
  rows.n = n;
  rows.dim = dim;
  rows.ld = device_row_stride(dim);
  rows.X.resize(static_cast<size_t>(std::max<int64_t>(n * rows.ld, 1)));
  {
    const PinnedRange pinned(X, static_cast<size_t>(n) * dim * sizeof(float));
    upload_rows(rows.X.get(), X, n, dim, rows.ld, stream.get());
    stream.sync();
  }
  const bool whole = whole_matrix_chosen(n, n * 24, p, options);  // as the C-SVC chooses (solve_each_C)
  std::vector<double> alpha = cpu::one_class_start(static_cast<int>(n), p.nu);
  const PairResult result = whole ? one_class_by_whole_matrix(blas.get(), rows, p, alpha, stream)
                                  : one_class_by_working_sets(blas.get(), rows, p, options, alpha, stream);
  if (result.hit_iteration_limit)
    cae::log_warn("svm gpu: the one-class fit reached the iteration limit before tol %g", p.tol);
  set_one_class_solution(m, X, alpha, result.rho);
  if (p.log_summary)
    cae::log_info("svm (gpu, %s): one-class, nu %g: %lld support vectors of %lld rows, %lld iterations, %.2f s",
                  whole ? "whole matrix" : "working sets", p.nu, static_cast<long long>(m.n_sv()),
                  static_cast<long long>(n), result.iterations, clock.seconds());
  return m;
}

}  // namespace cuda

Model fit_one_class_gpu(const float* X, int64_t n, int dim, const FitParams& p) {
  return cuda::fit_one_class(X, n, dim, p, cuda::FitOptions{});
}

Model fit_gpu_prepared(DeviceRows& rows, RawRows X, const int32_t* y, int64_t n, int raw_dim,
                       const PreparedRows& prepared, const FitParams& p, const PairCallback& cb) {
  return cuda::fit_prepared(rows, X, y, n, raw_dim, prepared, p, cb, cuda::FitOptions{}, nullptr);
}

Model fit_gpu(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, const PairCallback& cb) {
  return cuda::fit(X, y, n, dim, p, cb, cuda::FitOptions{}, nullptr);
}

std::vector<Model> fit_gpu_each_C(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                                  const std::vector<double>& Cs) {
  return cuda::fit_each_C(X, y, n, dim, p, Cs, {}, cuda::FitOptions{}, nullptr);
}

std::vector<std::vector<PairSolution>> solve_pairs_gpu(const float* X, const int32_t* y, int64_t n, int dim,
                                                       const FitParams& p, const std::vector<double>& Cs,
                                                       const std::vector<int>& pairs, const PairCallback& cb) {
  std::vector<std::vector<PairSolution>> out(Cs.size());
  if (pairs.empty()) return out;
  cuda::FitOptions options;
  options.pairs = pairs;
  cuda::FitStats st;
  const cuda::Solved sv = cuda::solve_each_C(X, nullptr, y, n, dim, p, Cs, cb, options, st);
  for (size_t c = 0; c < Cs.size(); ++c) out[c] = solutions_of(sv, c);
  if (p.log_summary)
    cae::log_info("svm (gpu, %s): %zu of the pairs: kernel matrix %.2f s, SMO %.2f s", st.mode.c_str(), pairs.size(),
                  st.kernel_s, st.smo_s);
  return out;
}

void decision_values_gpu(const Model& m, const float* X, int64_t n, double* dec) {
  using namespace cuda;
  const auto [k, start, n_sv, pairs] = decision_layout(m);
  const int dim = m.dim;
  if (dim < 1) throw std::invalid_argument("svm: inconsistent model");
  if (n <= 0) return;
  if (n_sv == 0) {  // every decision value is -rho
    for (int64_t r = 0; r < n; ++r)
      for (int q = 0; q < pairs; ++q) dec[r * pairs + q] = -m.rho[q];
    return;
  }

  // Page-locked while they go up: the copies run at the bus's speed and return at once, so
  // the first GEMMs' kernels load (CUDA's lazy loading) while the support vectors travel,
  // instead of after a pageable copy that held this thread (docs/SVM_GPU.md, "Decision
  // values").
  const PinnedRange pinned_sv(m.support_vectors.data(), m.support_vectors.size() * sizeof(float));
  const PinnedRange pinned_x(X, static_cast<size_t>(n) * static_cast<size_t>(dim) * sizeof(float));
  Stream stream;
  Blas blas(stream.get());
  const cudaStream_t s = stream.get();
  const int64_t ld = device_row_stride(dim);
  DeviceBuffer<float> d_sv(static_cast<size_t>(n_sv * ld));
  upload_rows(d_sv.get(), m.support_vectors.data(), n_sv, dim, ld, s);
  DeviceBuffer<double> d_coef, d_rho, d_sv_norms(static_cast<size_t>(n_sv));
  upload(d_coef, m.dual_coef.data(), m.dual_coef.size(), s);
  upload(d_rho, m.rho.data(), m.rho.size(), s);
  row_squared_norms(d_sv.get(), n_sv, dim, ld, d_sv_norms.get(), s);
  const Rows sv_rows{d_sv.get(), nullptr, ld};  // decision values in true FP32

  // Rows per block: dots (float) + kernel values (double) + input rows within ~2 GB, or a
  // quarter of free memory when less.
  const int64_t per_row = n_sv * 12 + ld * 4 + static_cast<int64_t>(k) * k * 8 + pairs * 8 + 8;
  const int64_t budget = std::min<int64_t>(int64_t{2} << 30, std::max<int64_t>(free_device_bytes() / 4, per_row));
  const int64_t block = std::clamp<int64_t>(budget / per_row, 1, n);
  DeviceBuffer<float> d_x(static_cast<size_t>(block * ld)), d_dots(static_cast<size_t>(block * n_sv));
  DeviceBuffer<double> d_x_norms(static_cast<size_t>(block)), d_kv(static_cast<size_t>(block * n_sv)),
      d_T(static_cast<size_t>(block * k * (k - 1))), d_dec(static_cast<size_t>(block * pairs));
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    upload_rows(d_x.get(), X + r0 * dim, rows, dim, ld, s);
    row_squared_norms(d_x.get(), rows, dim, ld, d_x_norms.get(), s);
    dots_rowmajor(blas.get(), Rows{d_x.get(), nullptr, ld}, rows, sv_rows, n_sv, d_dots.get(), n_sv);
    kernel_from_dots(d_dots.get(), rows, n_sv, d_x_norms.get(), d_sv_norms.get(), m.kernel, m.gamma, d_kv.get(), s);
    AE_CUDA_CHECK(cudaMemsetAsync(d_T.get(), 0, sizeof(double) * rows * k * (k - 1), s));
    // T[x, c, r] = Σ_{v in class c} dual_coef[r, v] K[x, v]  (column-major: [k-1, rows], ld k(k-1)).
    const double one = 1.0, zero = 0.0;
    for (int c = 0; c < k; ++c) {
      const int64_t nc = start[c + 1] - start[c];
      if (nc == 0) continue;
      SVM_CUBLAS_CHECK(cae::cublas::api().dgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, k - 1, static_cast<int>(rows),
                                   static_cast<int>(nc), &one, d_coef.get() + start[c], static_cast<int>(n_sv),
                                   d_kv.get() + start[c], static_cast<int>(n_sv), &zero,
                                   d_T.get() + static_cast<int64_t>(c) * (k - 1), k * (k - 1)));
    }
    combine_decisions(d_T.get(), rows, k, d_rho.get(), d_dec.get(), s);
    AE_CUDA_CHECK(cudaMemcpyAsync(dec + r0 * pairs, d_dec.get(), sizeof(double) * rows * pairs, cudaMemcpyDeviceToHost, s));
    stream.sync();
  }
}

}  // namespace svm
