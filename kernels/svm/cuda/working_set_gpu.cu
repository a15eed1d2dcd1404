// The working-set solver on the GPU (working_set_gpu.cuh; the rounds as
// kernels/svm/cpu/working_set.h states them, step for step).
#include "kernels/svm/cuda/working_set_gpu.cuh"

#include <cub/cub.cuh>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/log.h"
#include "kernels/svm/cpu/working_set.h"
#include "kernels/svm/cuda/working_set_select.cuh"
#include "kernels/svm/row_cache.h"

namespace svm::cuda {

using cae::cuda::DeviceBuffer;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kUpdateThreads = 256, kUpdatePerThread = 4, kUpdatePerBlock = kUpdateThreads * kUpdatePerThread;
constexpr int kFinishThreads = 1024;

struct Larger {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};
struct Smaller {
  __device__ double operator()(double a, double b) const { return fmin(a, b); }
};

// ---- conversions ---------------------------------------------------------------------------

__global__ void rows_to_half_kernel(const float* __restrict__ x, int64_t count, __half* __restrict__ out,
                                    int* overflow) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const __half h = __float2half_rn(x[i]);
    if (__hisinf(h)) *overflow = 1;
    out[i] = h;
  }
}

__global__ void half_row_norms_kernel(const __half* __restrict__ X, int64_t n, int dim, int64_t ld,
                                      double* __restrict__ out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;
  const __half* x = X + row * ld;
  double s = 0;
  for (int f = lane; f < dim; f += 32) {
    const double v = __half2float(x[f]);
    s += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) out[row] = s;
}

// ---- step 1 and 2: violations, their order, the working set ---------------------------------

// alpha = 0 and its gradient, the linear term (the rounds' and the float64 reference's).
__global__ void init_lane_kernel(double* alpha, double* G, double* G_ref, int n, double linear) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
    alpha[t] = 0;
    G[t] = linear;
    G_ref[t] = linear;
  }
}

// ---- step 3: the rows the cache lacks --------------------------------------------------------

template <typename T>
__global__ void gather_rows_kernel(const T* __restrict__ X, int64_t ld, const int64_t* __restrict__ rows,
                                   T* __restrict__ out) {
  const T* src = X + rows[blockIdx.x] * ld;
  T* dst = out + static_cast<int64_t>(blockIdx.x) * ld;
  for (int64_t f = threadIdx.x; f < ld; f += blockDim.x) dst[f] = src[f];
}

// Row r of dots [m, n] (its variable self[r], its row rows[r] of X) to cache slot slots[r]:
// the kernel values as the CPU's kernel_block makes them, the diagonal as the source states it.
__global__ void kernel_rows_kernel(const float* __restrict__ dots, int n, int na, int64_t start_a, int64_t start_b,
                                   const double* __restrict__ norms, const int64_t* __restrict__ rows,
                                   const int* __restrict__ self, const int* __restrict__ slots, int rbf, double gamma,
                                   float* __restrict__ cache) {
  const int r = blockIdx.x;
  const double row_norm = norms[rows[r]];
  const float* d = dots + static_cast<int64_t>(r) * n;
  float* out = cache + static_cast<int64_t>(slots[r]) * n;
  const int me = self[r];
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    float v = d[t];
    if (rbf) {
      const double col_norm = norms[t < na ? start_a + t : start_b + (t - na)];
      v = static_cast<float>(exp(-gamma * fmax(row_norm + col_norm - 2.0 * static_cast<double>(v), 0.0)));
    }
    if (t == me) v = rbf ? 1.0f : static_cast<float>(row_norm);
    out[t] = v;
  }
}

// ---- step 4: the subproblems -----------------------------------------------------------------

// Block (r, lane): row r of Q_BB's kernel values, and variable r's multiplier, gradient and
// K(x, x).
__global__ void subproblem_kernel(const Lane* __restrict__ lanes) {
  const Lane L = lanes[blockIdx.y];
  const int r = blockIdx.x;
  if (r >= L.count) return;
  const float* row = L.cache + static_cast<int64_t>(L.ws_slot[r]) * L.n;
  float* out = L.Kws + static_cast<int64_t>(r) * L.count;
  for (int c = threadIdx.x; c < L.count; c += blockDim.x) out[c] = row[L.ws[c]];
  if (threadIdx.x == 0) {
    const int t = L.ws[r];
    L.alpha_ws[r] = L.alpha_old[r] = L.alpha[t];
    L.G_ws[r] = L.G[t];
    L.diag_ws[r] = row[t];
  }
}

// ---- step 5: the gradient --------------------------------------------------------------------

// Block (tile, lane): G_t += y_t Σ_r y_r Δa_r K(r, t) over the rows whose multiplier moved, in
// the order of B; tile 0 also writes the new multipliers back.
__global__ void __launch_bounds__(kUpdateThreads) gradient_update_kernel(const Lane* __restrict__ lanes) {
  using Scan = cub::BlockScan<int, kUpdateThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ double coef[kMaxWorkingSet];
  __shared__ const float* row_of[kMaxWorkingSet];
  __shared__ int moved;
  const Lane L = lanes[blockIdx.y];
  const int t0 = blockIdx.x * kUpdatePerBlock;
  if (t0 >= L.n) return;
  if (threadIdx.x == 0) moved = 0;
  __syncthreads();
  for (int r0 = 0; r0 < L.count; r0 += kUpdateThreads) {
    const int r = r0 + threadIdx.x;
    double delta = 0;
    if (r < L.count) delta = L.alpha_ws[r] - L.alpha_old[r];
    const int flag = delta != 0 ? 1 : 0;
    int place = 0, total = 0;
    Scan(scan).ExclusiveSum(flag, place, total);
    if (flag) {
      const int t = L.ws[r];
      coef[moved + place] = t < L.na ? delta : -delta;
      row_of[moved + place] = L.cache + static_cast<int64_t>(L.ws_slot[r]) * L.n;
    }
    __syncthreads();
    if (threadIdx.x == 0) moved += total;
    __syncthreads();
  }
  if (blockIdx.x == 0)
    for (int r = threadIdx.x; r < L.count; r += kUpdateThreads) L.alpha[L.ws[r]] = L.alpha_ws[r];
  const int k = moved;
  for (int e = 0; e < kUpdatePerThread; ++e) {
    const int t = t0 + e * kUpdateThreads + threadIdx.x;
    if (t >= L.n) break;
    double acc = 0;
    for (int r = 0; r < k; ++r) acc = fma(coef[r], static_cast<double>(row_of[r][t]), acc);
    L.G[t] += t < L.na ? acc : -acc;
  }
}

// ---- the stopping test in float64 (kMaxFloat64Refreshes) ------------------------------------
//
// Its dot products, exact enough to test a gap of 1e-3 at 10⁶ rows (docs/DECISIONS.md,
// "Float64 sums from int8 slices"), two ways:
// - float16 rows as int8 slices (Ozaki's scheme). Each row is scaled by a power of two,
//   v = x·2^σ with max|v| in [32, 64), and written as four signed 7-bit digits,
//   v ≈ d₀ + d₁2⁻⁷ + d₂2⁻¹⁴ + d₃2⁻²¹ (|d_k| ≤ 64, each the nearest integer to the rest).
//   Then a·b ≈ 2^(−σa−σb) Σ_{i+j≤4} 2^(−7(i+j)) A_i·B_j: thirteen int8 GEMMs whose sums are
//   exact in int32 (the products i+j = L added into one level, beta 1), the five levels
//   combined in float64. A float16 at least 2⁻¹⁶ of its row's largest magnitude is held
//   exactly; the rest and the dropped products i + j ≥ 5 leave
//     |a·b − ã·b̃| ≤ 2⁻²⁶ (max|b|·|a|₁ + max|a|·|b|₁) + 2⁻³¹ · dim · max|a| · max|b|.
//   Level 4 is kept because the dropped products are not noise: a standardized feature
//   that was zero has one value in every row, so rows of one scale share its digits and
//   their d₂·d₂ add up with one sign over every such column and every support vector.
//   Thirteen int8 GEMMs cost less than one DGEMM on the tensor cores (the decision's
//   measurement).
// - float32 rows (those float16 cannot hold, 24-bit significands): widened to float64
//   exactly and multiplied by DGEMM.

constexpr int kSlices = 4;                 // digits of a row
constexpr int kLevels = 5;                 // the levels i + j = 0 .. kLevels − 1 of their products
constexpr int kSliceBits = 7;
constexpr int64_t kSliceAlign = 16;        // slice rows, block rows and columns: cuBLAS's int8 layout
constexpr int64_t kMaxSlicedLd = 1 << 17;  // a level's ≤ 4 GEMMs of ld products ≤ 64² each stay within int32
// The float64 sums' blocks: kFloat64Block rows and columns (a few waves of the int8 GEMMs'
// tiles on every SM) where that takes at most 1/kFloat64BudgetShare of the device budget,
// else smaller, kFloat64MinBlock at least.
constexpr int64_t kFloat64Block = 4096, kFloat64MinBlock = 128, kFloat64BudgetShare = 8;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }
bool sliced_rows(const WorkingSetRows& rows) {
  return rows.X16 != nullptr && round_up(rows.ld, kSliceAlign) < kMaxSlicedLd;
}

__device__ inline int64_t pair_row(int64_t start_a, int64_t start_b, int na, int t) {
  return t < na ? start_a + t : start_b + (t - na);
}

// Block r: row r of the slices out [kSlices][rows_pad][ld8] and its scale σ[r]: X's row
// cols[r] where cols, else the row of the pair's variable t0 + r; rows from `count` on zero.
__global__ void __launch_bounds__(256) slice_rows_kernel(const __half* __restrict__ X, int64_t ld,
                                                         const int64_t* __restrict__ cols, int64_t start_a,
                                                         int64_t start_b, int na, int t0, int count,
                                                         int64_t rows_pad, int64_t ld8, int8_t* __restrict__ out,
                                                         int* __restrict__ scale) {
  using Reduce = cub::BlockReduce<double, 256>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ int sigma;
  const int r = blockIdx.x;
  const int64_t slice_stride = rows_pad * ld8;
  int8_t* dst = out + static_cast<int64_t>(r) * ld8;
  if (r >= count) {
    for (int64_t f = threadIdx.x; f < ld8; f += blockDim.x)
      for (int k = 0; k < kSlices; ++k) dst[k * slice_stride + f] = 0;
    if (threadIdx.x == 0) scale[r] = 0;
    return;
  }
  const __half* src = X + (cols ? cols[r] : pair_row(start_a, start_b, na, t0 + r)) * ld;
  double largest = 0;
  for (int64_t f = threadIdx.x; f < ld; f += blockDim.x) largest = fmax(largest, fabs(__half2float(src[f])));
  largest = Reduce(temp).Reduce(largest, Larger());
  if (threadIdx.x == 0) {
    int e = 0;
    frexp(largest, &e);  // largest in [2^(e−1), 2^e) (e = 0 for a zero row)
    sigma = 6 - e;
    scale[r] = sigma;
  }
  __syncthreads();
  for (int64_t f = threadIdx.x; f < ld8; f += blockDim.x) {
    // v and every remainder have at most float16's 11 significant bits: each step is exact.
    float v = f < ld ? ldexpf(__half2float(src[f]), sigma) : 0.0f;
    for (int k = 0; k < kSlices; ++k) {
      const float digit = rintf(v);
      dst[k * slice_stride + f] = static_cast<int8_t>(digit);
      v = (v - digit) * static_cast<float>(1 << kSliceBits);
    }
  }
}

__device__ inline double widened(__half v) { return static_cast<double>(__half2float(v)); }
__device__ inline double widened(float v) { return static_cast<double>(v); }

// Block r: row r of out [rows, ld] = X's row cols[r] where cols, else the row of the pair's
// variable t0 + r — as float64, exactly.
template <typename T>
__global__ void widen_rows_kernel(const T* __restrict__ X, int64_t ld, const int64_t* __restrict__ cols,
                                  int64_t start_a, int64_t start_b, int na, int t0, double* __restrict__ out) {
  const int r = blockIdx.x;
  const T* src = X + (cols ? cols[r] : pair_row(start_a, start_b, na, t0 + r)) * ld;
  double* dst = out + static_cast<int64_t>(r) * ld;
  for (int64_t f = threadIdx.x; f < ld; f += blockDim.x) dst[f] = widened(src[f]);
}

// The epilogue's dot products, row i of a block with its column j: DGEMM's, or the int8
// levels' [kLevels][rows][ld] combined (each term exact in float64, the sum to its rounding).
struct WidenedDots {
  const double* D;
  int64_t ld;
  __device__ double operator()(int i, int j) const { return D[i * ld + j]; }
};
struct SlicedDots {
  const int32_t* D;
  int64_t ld, level_stride;
  const int *row_scale, *col_scale;
  __device__ double operator()(int i, int j) const {
    const int32_t* d = D + i * ld + j;
    double sum = 0;
    for (int level = kLevels - 1; level >= 0; --level)
      sum += ldexp(static_cast<double>(d[level * level_stride]), -kSliceBits * level);
    return ldexp(sum, -(row_scale[i] + col_scale[j]));
  }
};

// Block i: G[t0 + i] += y_t Σ_j coef[j] K(x_cols[j], x_t) over the block's `width` columns,
// from their float64 dot products, in one fixed order.
template <typename Dots>
__global__ void __launch_bounds__(256) add_kernel_sums_kernel(Dots dots, int width, int t0, int na, int64_t start_a,
                                                              int64_t start_b, const double* __restrict__ norms,
                                                              const int64_t* __restrict__ cols,
                                                              const int* __restrict__ self,
                                                              const double* __restrict__ coef, int rbf, double gamma,
                                                              double* __restrict__ G) {
  using Reduce = cub::BlockReduce<double, 256>;
  __shared__ typename Reduce::TempStorage temp;
  const int i = blockIdx.x, t = t0 + i;
  const double row_norm = norms[pair_row(start_a, start_b, na, t)];
  double acc = 0;
  for (int j = threadIdx.x; j < width; j += blockDim.x) {
    double k;
    if (self[j] == t)
      k = rbf ? 1.0 : row_norm;  // the diagonal as the source states it
    else if (rbf)
      k = exp(-gamma * fmax(row_norm + norms[cols[j]] - 2.0 * dots(i, j), 0.0));
    else
      k = dots(i, j);
    acc = fma(coef[j], k, acc);
  }
  acc = Reduce(temp).Sum(acc);
  if (threadIdx.x == 0) G[t] += t < na ? acc : -acc;
}

// ---- the end: rho and the objective (cpu::finish_dual) --------------------------------------

__global__ void __launch_bounds__(kFinishThreads) finish_kernel(const Lane* __restrict__ lanes,
                                                                PairResult* __restrict__ results) {
  using Reduce = cub::BlockReduce<double, kFinishThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const Lane L = lanes[blockIdx.x];
  double ub = kInf, lb = -kInf, free_sum = 0, free_count = 0, obj = 0;
  for (int t = threadIdx.x; t < L.n; t += blockDim.x) {
    const bool positive = t < L.na;
    const double a = L.alpha[t], C = positive ? L.Cp : L.Cn, yG = positive ? L.G[t] : -L.G[t];
    if (a >= C) {
      if (!positive) ub = fmin(ub, yG); else lb = fmax(lb, yG);
    } else if (a <= 0) {
      if (positive) ub = fmin(ub, yG); else lb = fmax(lb, yG);
    } else {
      free_sum += yG;
      free_count += 1;
    }
    obj += a * (L.G[t] + L.linear);
  }
  ub = Reduce(temp).Reduce(ub, Smaller());
  __syncthreads();
  lb = Reduce(temp).Reduce(lb, Larger());
  __syncthreads();
  free_sum = Reduce(temp).Sum(free_sum);
  __syncthreads();
  free_count = Reduce(temp).Sum(free_count);
  __syncthreads();
  obj = Reduce(temp).Sum(obj);
  if (threadIdx.x == 0) {
    PairResult& res = results[blockIdx.x];
    res.rho = free_count > 0 ? free_sum / free_count : (ub + lb) / 2;
    res.objective = obj / 2;
    res.n_free = static_cast<int>(free_count);
  }
}

// ---- the host side ---------------------------------------------------------------------------

template <typename T>
T* carve(unsigned char*& at, int64_t count) {
  T* p = reinterpret_cast<T*>(at);
  at += (count * static_cast<int64_t>(sizeof(T)) + 255) / 256 * 256;
  return p;
}
int64_t carved(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// One lane's buffers, carved from one allocation.
struct LaneMemory {
  double *alpha, *G, *G_ref, *alpha_ws, *alpha_old, *G_ws, *diag_ws, *gap;
  uint8_t *chosen, *status;
  int *ws, *ws_count, *ws_slot, *fresh[2];
  float *Kws, *cache;
  int64_t cache_bytes;
};
int64_t lane_fixed_bytes(int64_t n_max, int64_t q) {
  return 3 * carved(n_max * 8) + 4 * carved(q * 8) + carved(n_max) + carved(q) + 2 * carved((q + 1) * 4) +
         carved(q * q * 4);
}

// The subproblems' GEMM: dots[r, c] (row-major, ldc) = A_r · B_c over ld columns, for rows
// A [rows, ld] and B [cols, ld] of float16 (float32 accumulation on the tensor cores) or
// float32 (true FP32: the math mode is cuBLAS's default).
void row_dots(cublasHandle_t h, const void* A, const void* B, bool half, int64_t rows, int64_t cols, int64_t ld,
              float* C, int64_t ldc) {
  if (rows == 0 || cols == 0) return;
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t type = half ? CUDA_R_16F : CUDA_R_32F;
  SVM_CUBLAS_CHECK(cae::cublas::api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(cols),
                                              static_cast<int>(rows), static_cast<int>(ld), &one, B, type,
                                              static_cast<int>(ld), A, type, static_cast<int>(ld), &zero, C,
                                              CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));
}

// What one round asks of the host for a lane, and what it keeps between rounds.
struct LaneHost {
  int pair = -1;  // -1: idle
  int n = 0, na = 0;
  std::unique_ptr<RowSlots> slots;
  int64_t capacity = 0;
  long long iterations = 0, max_iter = 0;
  int64_t rounds = 0, rows_computed = 0;
  bool hit_limit = false, stalled = false;
  int parity = 0;  // which of the lane's two fresh lists is this round's kept one
  // The float64 test (kMaxFloat64Refreshes): the multipliers of the last float64 gradient,
  // whether G is that gradient still (no round since), how many were taken.
  std::vector<double> alpha_ref;
  bool float64_gradient = false;
  int refreshes = 0;
  int64_t refreshed_columns = 0;
};

// A lane's device state pointing at its buffers, for a working set of `count` variables; the
// selection's own fields (bounds, keys, kept and fresh lists) are the caller's.
Lane lane_state(const LaneHost& h, const LaneMemory& m, int count) {
  Lane L;
  L.n = h.n;
  L.na = h.na;
  L.alpha = m.alpha;
  L.G = m.G;
  L.chosen = m.chosen;
  L.ws = m.ws;
  L.ws_count = m.ws_count;
  L.gap = m.gap;
  L.count = count;
  L.ws_slot = m.ws_slot;
  L.cache = m.cache;
  L.Kws = m.Kws;
  L.alpha_ws = m.alpha_ws;
  L.alpha_old = m.alpha_old;
  L.G_ws = m.G_ws;
  L.diag_ws = m.diag_ws;
  return L;
}

// The float64 sums' blocks: the bytes of one of `cols` columns and `rows` rows.
int64_t sliced_block_bytes(int64_t ld8, int64_t cols, int64_t rows) {
  return carved(kSlices * cols * ld8) + carved(kSlices * rows * ld8) + carved(kLevels * rows * cols * 4) +
         carved(cols * 4) + carved(rows * 4);
}
int64_t widened_block_bytes(int64_t ld, int64_t cols, int64_t rows) {
  return carved(cols * ld * 8) + carved(rows * ld * 8) + carved(rows * cols * 8);
}

// The largest block within `scratch` bytes: as many columns as rows where there is room and
// that many columns are asked for, then as many rows as are left room for, `align` apart.
struct Float64Block {
  int64_t cols = 0, rows = 0;
};
template <typename Bytes>
Float64Block float64_block(const Bytes& bytes, int64_t scratch, int64_t count, int64_t n, int64_t align) {
  Float64Block b;
  const int64_t want_cols = round_up(count, align), want_rows = round_up(n, align);
  int64_t side = align;
  while (side < want_cols && bytes(2 * side, 2 * side) <= scratch) side *= 2;  // then grow it by align
  for (int64_t step = side / 2; step >= align; step /= 2)
    if (side + step <= want_cols && bytes(side + step, side + step) <= scratch) side += step;
  b.cols = std::min(side, want_cols);
  b.rows = b.cols;
  for (int64_t step = int64_t{1} << 40; step >= align; step /= 2)
    if (b.rows + step <= want_rows && bytes(b.cols, b.rows + step) <= scratch) b.rows += step;
  b.rows = std::min(b.rows, want_rows);
  if (bytes(b.cols, b.rows) > scratch) b = {};
  return b;
}

void add_sliced_kernel_sums(cublasHandle_t blas, const WorkingSetRows& rows, const WorkingSetPair& pair,
                            const int64_t* cols, const int* self, const double* coef, int count, KernelType kernel,
                            double gamma, void* scratch, int64_t scratch_bytes, double* G, cudaStream_t s) {
  const int n = pair.na + pair.nb;
  const int64_t ld = rows.ld, ld8 = round_up(ld, kSliceAlign);
  const Float64Block block = float64_block([&](int64_t c, int64_t r) { return sliced_block_bytes(ld8, c, r); },
                                           scratch_bytes, count, n, kSliceAlign);
  if (block.cols < 1) throw std::logic_error("svm gpu: the float64 gradient's scratch holds no block");
  unsigned char* at = static_cast<unsigned char*>(scratch);
  int8_t* S = carve<int8_t>(at, kSlices * block.cols * ld8);
  int8_t* T = carve<int8_t>(at, kSlices * block.rows * ld8);
  int32_t* D = carve<int32_t>(at, kLevels * block.rows * block.cols);
  int* col_scale = carve<int>(at, block.cols);
  int* row_scale = carve<int>(at, block.rows);
  const int32_t one = 1, zero = 0;
  for (int64_t s0 = 0; s0 < count; s0 += block.cols) {
    const int width = static_cast<int>(std::min<int64_t>(block.cols, count - s0));
    const int64_t width8 = round_up(width, kSliceAlign);
    slice_rows_kernel<<<static_cast<unsigned>(width8), 256, 0, s>>>(rows.X16, ld, cols + s0, pair.start_a,
                                                                     pair.start_b, pair.na, 0, width, width8, ld8, S,
                                                                     col_scale);
    AE_CUDA_LAUNCH_CHECK();
    for (int64_t t0 = 0; t0 < n; t0 += block.rows) {
      const int height = static_cast<int>(std::min<int64_t>(block.rows, n - t0));
      const int64_t height8 = round_up(height, kSliceAlign);
      slice_rows_kernel<<<static_cast<unsigned>(height8), 256, 0, s>>>(rows.X16, ld, nullptr, pair.start_a,
                                                                       pair.start_b, pair.na, static_cast<int>(t0),
                                                                       height, height8, ld8, T, row_scale);
      AE_CUDA_LAUNCH_CHECK();
      // Level L [height8, width8] (row-major, width8 apart) = Σ_{i+j=L} T_j·S_iᵀ: its
      // column-major transpose is Σ S_iᵀ·T_j.
      for (int level = 0; level < kLevels; ++level)
        for (int i = std::max(0, level - (kSlices - 1)); i <= std::min(level, kSlices - 1); ++i)
          SVM_CUBLAS_CHECK(cae::cublas::api().gemm_ex(
              blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(width8), static_cast<int>(height8),
              static_cast<int>(ld8), &one, S + i * width8 * ld8, CUDA_R_8I, static_cast<int>(ld8),
              T + (level - i) * height8 * ld8, CUDA_R_8I, static_cast<int>(ld8),
              i == std::max(0, level - (kSlices - 1)) ? &zero : &one,
              D + level * height8 * width8, CUDA_R_32I, static_cast<int>(width8), CUBLAS_COMPUTE_32I,
              CUBLAS_GEMM_DEFAULT));
      const SlicedDots dots{D, width8, height8 * width8, row_scale, col_scale};
      add_kernel_sums_kernel<<<static_cast<unsigned>(height), 256, 0, s>>>(
          dots, width, static_cast<int>(t0), pair.na, pair.start_a, pair.start_b, rows.norms, cols + s0, self + s0,
          coef + s0, kernel == KernelType::rbf ? 1 : 0, gamma, G);
      AE_CUDA_LAUNCH_CHECK();
    }
  }
}

void add_widened_kernel_sums(cublasHandle_t blas, const WorkingSetRows& rows, const WorkingSetPair& pair,
                             const int64_t* cols, const int* self, const double* coef, int count, KernelType kernel,
                             double gamma, void* scratch, int64_t scratch_bytes, double* G, cudaStream_t s) {
  const int n = pair.na + pair.nb;
  const int64_t ld = rows.ld;
  const Float64Block block = float64_block([&](int64_t c, int64_t r) { return widened_block_bytes(ld, c, r); },
                                           scratch_bytes, count, n, 1);
  if (block.cols < 1) throw std::logic_error("svm gpu: the float64 gradient's scratch holds no block");
  unsigned char* at = static_cast<unsigned char*>(scratch);
  double* S = carve<double>(at, block.cols * ld);
  double* T = carve<double>(at, block.rows * ld);
  double* D = carve<double>(at, block.rows * block.cols);
  auto widen = [&](const int64_t* from, int r0, int64_t count_rows, double* out) {
    if (rows.X16)
      widen_rows_kernel<<<static_cast<unsigned>(count_rows), 256, 0, s>>>(rows.X16, ld, from, pair.start_a,
                                                                          pair.start_b, pair.na, r0, out);
    else
      widen_rows_kernel<<<static_cast<unsigned>(count_rows), 256, 0, s>>>(rows.X32, ld, from, pair.start_a,
                                                                          pair.start_b, pair.na, r0, out);
    AE_CUDA_LAUNCH_CHECK();
  };
  const double one = 1.0, zero = 0.0;
  for (int64_t s0 = 0; s0 < count; s0 += block.cols) {
    const int width = static_cast<int>(std::min<int64_t>(block.cols, count - s0));
    widen(cols + s0, 0, width, S);
    for (int64_t t0 = 0; t0 < n; t0 += block.rows) {
      const int height = static_cast<int>(std::min<int64_t>(block.rows, n - t0));
      widen(nullptr, static_cast<int>(t0), height, T);
      // D[i, j] = T_i · S_j (row-major, width apart): D's column-major transpose is Sᵀ·T.
      SVM_CUBLAS_CHECK(cae::cublas::api().dgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, width, height, static_cast<int>(ld),
                                                &one, S, static_cast<int>(ld), T, static_cast<int>(ld), &zero, D,
                                                width));
      add_kernel_sums_kernel<<<static_cast<unsigned>(height), 256, 0, s>>>(
          WidenedDots{D, width}, width, static_cast<int>(t0), pair.na, pair.start_a, pair.start_b, rows.norms,
          cols + s0, self + s0, coef + s0, kernel == KernelType::rbf ? 1 : 0, gamma, G);
      AE_CUDA_LAUNCH_CHECK();
    }
  }
}

}  // namespace

int64_t float64_gradient_scratch_bytes(const WorkingSetRows& rows, int64_t block) {
  const int64_t b = std::max<int64_t>(block, 1);
  if (sliced_rows(rows)) {
    const int64_t b8 = round_up(b, kSliceAlign);
    return sliced_block_bytes(round_up(rows.ld, kSliceAlign), b8, b8);
  }
  return widened_block_bytes(rows.ld, b, b);
}

void add_float64_kernel_sums(cublasHandle_t blas, const WorkingSetRows& rows, const WorkingSetPair& pair,
                             const int64_t* cols, const int* self, const double* coef, int count, KernelType kernel,
                             double gamma, void* scratch, int64_t scratch_bytes, double* G, cudaStream_t s) {
  if (count <= 0 || pair.na + pair.nb <= 0) return;
  if (sliced_rows(rows))
    add_sliced_kernel_sums(blas, rows, pair, cols, self, coef, count, kernel, gamma, scratch, scratch_bytes, G, s);
  else
    add_widened_kernel_sums(blas, rows, pair, cols, self, coef, count, kernel, gamma, scratch, scratch_bytes, G, s);
}

void rows_to_half(const float* x, int64_t count, __half* out, int* overflow, cudaStream_t stream) {
  if (count <= 0) return;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, int64_t{1} << 16);
  rows_to_half_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, count, out, overflow);
  AE_CUDA_LAUNCH_CHECK();
}

void half_row_squared_norms(const __half* X, int64_t n, int dim, int64_t ld, double* out, cudaStream_t stream) {
  if (n == 0) return;
  half_row_norms_kernel<<<static_cast<unsigned>((n + 7) / 8), 256, 0, stream>>>(X, n, dim, ld, out);
  AE_CUDA_LAUNCH_CHECK();
}

std::vector<WorkingSetOutcome> solve_working_sets(cublasHandle_t blas, const WorkingSetRows& rows,
                                                  const std::vector<WorkingSetPair>& pairs,
                                                  const WorkingSetConfig& config, cudaStream_t s,
                                                  const std::function<void(int)>& on_pair_done,
                                                  WorkingSetTotals* totals) {
  const int P = static_cast<int>(pairs.size());
  std::vector<WorkingSetOutcome> out(static_cast<size_t>(P));
  if (P == 0) return out;
  const int q_max = std::clamp(config.working_set_size, 2, kMaxWorkingSet);
  const bool half = rows.X16 != nullptr;
  const void* X = half ? static_cast<const void*>(rows.X16) : static_cast<const void*>(rows.X32);
  const int64_t elem = half ? 2 : 4, ld = rows.ld;
  int64_t n_max = 0;
  for (const auto& p : pairs) n_max = std::max<int64_t>(n_max, int64_t{p.na} + p.nb);
  if (n_max >= kMaxPairRows)
    throw std::runtime_error("svm gpu: a class pair of " + std::to_string(n_max) + " rows; the working-set solver "
                             "takes pairs of up to " + std::to_string(kMaxPairRows - 1));

  // ---- memory: shared staging, then per lane its state and a row cache of at least q rows ----
  const int64_t q_rows = std::min<int64_t>(q_max, n_max);
  const int chunks_max = selection_chunks(n_max);
  // The rounds' dot products and the float64 gradient's blocks share one scratch (both run in
  // stream order), beside the float64 gradient's changed multipliers.
  int64_t float64_bytes = float64_gradient_scratch_bytes(rows, std::min(n_max, kFloat64MinBlock));
  for (int64_t b = kFloat64Block; b > kFloat64MinBlock; b /= 2)
    if (const int64_t bytes = float64_gradient_scratch_bytes(rows, std::min(n_max, b));
        bytes <= config.budget_bytes / kFloat64BudgetShare) {
      float64_bytes = std::max(float64_bytes, bytes);
      break;
    }
  const int64_t dots_bytes = std::max(q_rows * n_max * 4, float64_bytes);
  const int64_t staging = carved(dots_bytes) + carved(q_rows * ld * elem) + carved(q_rows * 8) +
                          2 * carved(q_rows * 4) + carved(n_max * 8) + carved(n_max * 4) + carved(n_max * 8);
  const int64_t min_cache = q_rows * n_max * 4, whole_pair = n_max * n_max * 4;
  const int64_t fixed_lane = lane_fixed_bytes(n_max, q_rows);
  // The sort's keys (in and out) and its scratch, for every lane's two lists.
  auto sort_bytes = [&](int lanes) {
    const int64_t keys = 2 * n_max * lanes;
    return 2 * carved(keys * 8) + carved(static_cast<int64_t>(selection_sort_bytes(keys, s))) + 2 * carved(int64_t{chunks_max} * lanes * 8) +
           carved(lanes * static_cast<int64_t>(sizeof(Lane))) + carved(lanes * static_cast<int64_t>(sizeof(PairJob))) +
           carved(lanes * static_cast<int64_t>(sizeof(PairResult))) +
           carved(lanes * static_cast<int64_t>(sizeof(Readback))) + carved(int64_t{lanes} * kMaxWorkingSet * 4);
  };
  const int64_t budget = config.budget_bytes;
  // Lanes: as many pairs side by side as leave each a cache of the smaller of its whole
  // matrix and kCacheWorkingSets working sets' rows (docs/SVM_GPU.md, "Working sets").
  constexpr int64_t kCacheWorkingSets = 8;
  const int64_t want_lane = fixed_lane + std::max(min_cache, std::min(whole_pair, kCacheWorkingSets * min_cache));
  int lanes = config.lanes > 0 ? config.lanes
                               : static_cast<int>(std::clamp<int64_t>((budget - staging) / want_lane, 1, kMaxLanes));
  lanes = std::min({lanes, P, kMaxLanes});
  // --cache-mb: as many lanes as it gives a working set's rows each (one at least, as the
  // CPU's solver keeps its q rows whatever the budget), and their caches within it.
  if (config.cache_bytes >= 0) lanes = static_cast<int>(std::clamp<int64_t>(config.cache_bytes / min_cache, 1, lanes));
  while (lanes > 1 && staging + sort_bytes(lanes) + lanes * (fixed_lane + min_cache) > budget) --lanes;
  int64_t cache_per_lane = std::min(whole_pair, (budget - staging - sort_bytes(lanes)) / lanes - fixed_lane);
  if (config.cache_rows > 0) cache_per_lane = std::min(cache_per_lane, std::max(config.cache_rows, q_rows) * n_max * 4);
  if (config.cache_bytes >= 0) cache_per_lane = std::min(cache_per_lane, std::max(config.cache_bytes / lanes, min_cache));
  if (cache_per_lane < min_cache)
    throw std::runtime_error("svm gpu: the working-set solver needs " +
                             std::to_string((staging + sort_bytes(1) + fixed_lane + min_cache) >> 20) +
                             " MB of GPU memory for a class pair of " + std::to_string(n_max) + " rows beside the rows, " +
                             std::to_string(std::max<int64_t>(budget, 0) >> 20) + " MB are free");

  cache_per_lane = carved(cache_per_lane);  // whole 256-byte blocks, as carve lays them out
  DeviceBuffer<unsigned char> arena(static_cast<size_t>(staging + sort_bytes(lanes) +
                                                        lanes * (fixed_lane + cache_per_lane)));
  unsigned char* at = arena.get();
  float* d_dots = carve<float>(at, dots_bytes / 4);
  unsigned char* d_gathered = carve<unsigned char>(at, q_rows * ld * elem);
  int64_t* d_rows = carve<int64_t>(at, q_rows);
  int* d_self = carve<int>(at, q_rows);
  int* d_new_slots = carve<int>(at, q_rows);
  int64_t* d_moved_rows = carve<int64_t>(at, n_max);
  int* d_moved_self = carve<int>(at, n_max);
  double* d_moved_coef = carve<double>(at, n_max);
  const int64_t key_capacity = 2 * n_max * lanes;
  SelectionScratch selection;
  selection.keys = carve<uint64_t>(at, key_capacity);
  selection.sorted = carve<uint64_t>(at, key_capacity);
  selection.sort_temp_bytes = selection_sort_bytes(key_capacity, s);
  selection.sort_temp = carve<unsigned char>(at, static_cast<int64_t>(selection.sort_temp_bytes));
  selection.partial_up = carve<double>(at, int64_t{chunks_max} * lanes);
  selection.partial_low = carve<double>(at, int64_t{chunks_max} * lanes);
  Lane* d_lanes = carve<Lane>(at, lanes);
  PairJob* d_jobs = carve<PairJob>(at, lanes);
  PairResult* d_results = carve<PairResult>(at, lanes);
  Readback* d_readback = carve<Readback>(at, lanes);
  int* d_slots = carve<int>(at, int64_t{lanes} * kMaxWorkingSet);
  std::vector<LaneMemory> mem(static_cast<size_t>(lanes));
  const int64_t q = q_rows;
  for (int l = 0; l < lanes; ++l) {
    LaneMemory& m = mem[l];
    m.ws = d_readback[l].ws;
    m.ws_count = &d_readback[l].count;
    m.gap = d_readback[l].gap;
    m.ws_slot = d_slots + static_cast<int64_t>(l) * kMaxWorkingSet;
    m.alpha = carve<double>(at, n_max);
    m.G = carve<double>(at, n_max);
    m.G_ref = carve<double>(at, n_max);
    m.alpha_ws = carve<double>(at, q);
    m.alpha_old = carve<double>(at, q);
    m.G_ws = carve<double>(at, q);
    m.diag_ws = carve<double>(at, q);
    m.chosen = carve<uint8_t>(at, n_max);
    m.status = carve<uint8_t>(at, q);
    m.fresh[0] = carve<int>(at, q + 1);
    m.fresh[1] = carve<int>(at, q + 1);
    m.Kws = carve<float>(at, q * q);
    m.cache = carve<float>(at, cache_per_lane / 4);
    m.cache_bytes = cache_per_lane;
    AE_CUDA_CHECK(cudaMemsetAsync(m.chosen, 0, static_cast<size_t>(n_max), s));
  }
  if (totals) {
    totals->lanes = lanes;
    totals->cache_rows_per_lane = cache_per_lane / (n_max * 4);
  }

  // Host mirrors, page-locked so the per-round copies are single transfers.
  cae::cuda::PinnedBuffer<Readback> readback(static_cast<size_t>(lanes));
  cae::cuda::PinnedBuffer<Lane> lane_args(static_cast<size_t>(lanes)), finish_args(static_cast<size_t>(lanes));
  cae::cuda::PinnedBuffer<PairJob> job_args(static_cast<size_t>(lanes));
  cae::cuda::PinnedBuffer<PairResult> result_args(static_cast<size_t>(lanes));
  cae::cuda::PinnedBuffer<int> slot_args(static_cast<size_t>(lanes) * kMaxWorkingSet);
  // Each lane's part of a round's requests apart, so no lane's copy waits for another's.
  const size_t request = static_cast<size_t>(lanes) * static_cast<size_t>(q_rows);
  cae::cuda::PinnedBuffer<int64_t> row_args(request);
  cae::cuda::PinnedBuffer<int> self_args(request), new_slot_args(request);

  std::vector<LaneHost> host(static_cast<size_t>(lanes));
  int next_pair = 0, done = 0;
  // Pairs start largest first, so the last to finish are short ones.
  std::vector<int> order(static_cast<size_t>(P));
  for (int p = 0; p < P; ++p) order[p] = p;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return int64_t{pairs[a].na} + pairs[a].nb > int64_t{pairs[b].na} + pairs[b].nb;
  });
  const int rbf = config.kernel == KernelType::rbf ? 1 : 0;
  // Lane l's kernel rows of variables vars[0, count) in its cache — the missing ones computed
  // by one gather and two GEMMs against the pair's rows — and their slots to lane l's part of
  // slot_args; `part`: the part of the round's host requests these copies use.
  auto cache_rows = [&](int l, const int* vars, int count, int part) {
    LaneHost& h = host[l];
    const WorkingSetPair& pr = pairs[h.pair];
    RowSlots& slots = *h.slots;
    int missing = 0;
    int64_t* lane_rows = row_args.get() + static_cast<size_t>(part) * q_rows;
    int* lane_self = self_args.get() + static_cast<size_t>(part) * q_rows;
    int* lane_new = new_slot_args.get() + static_cast<size_t>(part) * q_rows;
    for (int r = 0; r < count; ++r)
      if (slots.slot_of(vars[r]) >= 0) slots.touch(slots.slot_of(vars[r]));
    for (int r = 0; r < count; ++r) {
      const int t = vars[r];
      if (slots.slot_of(t) < 0) {
        lane_new[missing] = slots.take_for(t);
        lane_self[missing] = t;
        lane_rows[missing] = t < h.na ? pr.start_a + t : pr.start_b + (t - h.na);
        ++missing;
      }
      slot_args[static_cast<size_t>(l) * kMaxWorkingSet + r] = slots.slot_of(t);
    }
    if (missing == 0) return;
    // Staging is shared: these copies and kernels run in stream order, one lane after another.
    AE_CUDA_CHECK(cudaMemcpyAsync(d_rows, lane_rows, sizeof(int64_t) * missing, cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_self, lane_self, sizeof(int) * missing, cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_new_slots, lane_new, sizeof(int) * missing, cudaMemcpyHostToDevice, s));
    if (half)
      gather_rows_kernel<<<missing, 256, 0, s>>>(rows.X16, ld, d_rows, reinterpret_cast<__half*>(d_gathered));
    else
      gather_rows_kernel<<<missing, 256, 0, s>>>(rows.X32, ld, d_rows, reinterpret_cast<float*>(d_gathered));
    AE_CUDA_LAUNCH_CHECK();
    const unsigned char* Xa = static_cast<const unsigned char*>(X) + pr.start_a * ld * elem;
    const unsigned char* Xb = static_cast<const unsigned char*>(X) + pr.start_b * ld * elem;
    row_dots(blas, d_gathered, Xa, half, missing, h.na, ld, d_dots, h.n);
    row_dots(blas, d_gathered, Xb, half, missing, h.n - h.na, ld, d_dots + h.na, h.n);
    kernel_rows_kernel<<<missing, 256, 0, s>>>(d_dots, h.n, h.na, pr.start_a, pr.start_b, rows.norms, d_rows, d_self,
                                               d_new_slots, rbf, config.gamma, mem[l].cache);
    AE_CUDA_LAUNCH_CHECK();
    h.rows_computed += missing;
  };
  // A start of lane l's pair other than alpha = 0 (WorkingSetPair::start): its multipliers
  // enter from alpha = 0 as moves of up to q variables, each step 5 of a round (Δa = the start
  // values), so G = Qa + linear·e as the rounds keep it, on the rows they use.
  cae::cuda::PinnedBuffer<int> start_vars(static_cast<size_t>(q_rows));
  cae::cuda::PinnedBuffer<double> start_values(static_cast<size_t>(q_rows));
  cae::cuda::PinnedBuffer<Lane> start_lane(1);
  auto enter_start = [&](int l) {
    const LaneHost& h = host[l];
    const double* start = pairs[h.pair].start;
    std::vector<int> nonzero;
    for (int t = 0; t < h.n; ++t)
      if (start[t] != 0) nonzero.push_back(t);
    for (size_t b0 = 0; b0 < nonzero.size(); b0 += static_cast<size_t>(q_rows)) {
      const int count = static_cast<int>(std::min<size_t>(static_cast<size_t>(q_rows), nonzero.size() - b0));
      cache_rows(l, nonzero.data() + b0, count, 0);
      for (int r = 0; r < count; ++r) {
        start_vars[r] = nonzero[b0 + r];
        start_values[r] = start[nonzero[b0 + r]];
      }
      start_lane[0] = lane_state(h, mem[l], count);
      AE_CUDA_CHECK(cudaMemcpyAsync(mem[l].ws, start_vars.get(), sizeof(int) * count, cudaMemcpyHostToDevice, s));
      AE_CUDA_CHECK(cudaMemcpyAsync(mem[l].alpha_ws, start_values.get(), sizeof(double) * count,
                                    cudaMemcpyHostToDevice, s));
      AE_CUDA_CHECK(cudaMemsetAsync(mem[l].alpha_old, 0, sizeof(double) * count, s));
      AE_CUDA_CHECK(cudaMemcpyAsync(mem[l].ws_slot, slot_args.get() + static_cast<size_t>(l) * kMaxWorkingSet,
                                    sizeof(int) * count, cudaMemcpyHostToDevice, s));
      AE_CUDA_CHECK(cudaMemcpyAsync(d_lanes, start_lane.get(), sizeof(Lane), cudaMemcpyHostToDevice, s));
      const int tiles = (h.n + kUpdatePerBlock - 1) / kUpdatePerBlock;
      gradient_update_kernel<<<dim3(tiles, 1), kUpdateThreads, 0, s>>>(d_lanes);
      AE_CUDA_LAUNCH_CHECK();
      AE_CUDA_CHECK(cudaStreamSynchronize(s));  // the pinned arguments are the next batch's
    }
  };
  auto start_pair = [&](int l) {
    LaneHost& h = host[l];
    h = LaneHost{};
    if (next_pair >= P) return;
    h.pair = order[next_pair++];
    const WorkingSetPair& pr = pairs[h.pair];
    h.n = pr.na + pr.nb;
    h.na = pr.na;
    h.capacity = std::min<int64_t>(h.n, mem[l].cache_bytes / (int64_t{h.n} * 4));
    h.slots = std::make_unique<RowSlots>(h.n, static_cast<int>(h.capacity));
    h.max_iter = std::max<long long>(10000000LL, h.n > INT_MAX / 100 ? INT_MAX : 100LL * h.n);
    h.alpha_ref.assign(static_cast<size_t>(h.n), 0.0);
    init_lane_kernel<<<static_cast<unsigned>(std::min<int64_t>((h.n + 255) / 256, 4096)), 256, 0, s>>>(
        mem[l].alpha, mem[l].G, mem[l].G_ref, h.n, pr.linear);
    AE_CUDA_LAUNCH_CHECK();
    AE_CUDA_CHECK(cudaMemsetAsync(mem[l].fresh[0], 0, sizeof(int), s));  // nothing kept in the first round
    if (pr.start) enter_start(l);
  };
  // Lane l's gradient in float64 (kMaxFloat64Refreshes): G_ref plus the sums over the
  // multipliers that moved since it was last taken, then G = G_ref.
  cae::cuda::PinnedBuffer<double> alpha_now(static_cast<size_t>(n_max)), moved_coef(static_cast<size_t>(n_max));
  cae::cuda::PinnedBuffer<int64_t> moved_rows(static_cast<size_t>(n_max));
  cae::cuda::PinnedBuffer<int> moved_self(static_cast<size_t>(n_max));
  auto refresh_float64 = [&](int l) {
    LaneHost& h = host[l];
    const WorkingSetPair& pr = pairs[h.pair];
    AE_CUDA_CHECK(cudaMemcpyAsync(alpha_now.get(), mem[l].alpha, sizeof(double) * h.n, cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(cudaStreamSynchronize(s));
    int moved = 0;
    for (int t = 0; t < h.n; ++t) {
      const double delta = alpha_now[t] - h.alpha_ref[t];
      if (delta == 0) continue;
      moved_rows[moved] = t < h.na ? pr.start_a + t : pr.start_b + (t - h.na);
      moved_self[moved] = t;
      moved_coef[moved] = t < h.na ? delta : -delta;
      h.alpha_ref[t] = alpha_now[t];
      ++moved;
    }
    AE_CUDA_CHECK(cudaMemcpyAsync(d_moved_rows, moved_rows.get(), sizeof(int64_t) * moved, cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_moved_self, moved_self.get(), sizeof(int) * moved, cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_moved_coef, moved_coef.get(), sizeof(double) * moved, cudaMemcpyHostToDevice, s));
    add_float64_kernel_sums(blas, rows, pr, d_moved_rows, d_moved_self, d_moved_coef, moved, config.kernel,
                            config.gamma, d_dots, dots_bytes, mem[l].G_ref, s);
    AE_CUDA_CHECK(cudaMemcpyAsync(mem[l].G, mem[l].G_ref, sizeof(double) * h.n, cudaMemcpyDeviceToDevice, s));
    AE_CUDA_CHECK(cudaStreamSynchronize(s));  // the pinned lists are the next lane's
    h.float64_gradient = true;
    h.stalled = false;  // a new gradient: the next subproblem is another one
    ++h.refreshes;
    h.refreshed_columns += moved;
  };
  for (int l = 0; l < lanes; ++l) start_pair(l);

  std::vector<int> active;
  for (;;) {
    active.clear();
    for (int l = 0; l < lanes; ++l)
      if (host[l].pair >= 0) active.push_back(l);
    if (active.empty()) break;
    const int A = static_cast<int>(active.size());
    // ---- steps 1-2 for every active lane ----
    int64_t key_total = 0;
    int chunks = 0;
    for (int a = 0; a < A; ++a) {
      const int l = active[a];
      const LaneHost& h = host[l];
      const WorkingSetPair& pr = pairs[h.pair];
      Lane& L = lane_args[a];
      L = lane_state(h, mem[l], 0);
      L.Cp = pr.Cp;
      L.Cn = pr.Cn;
      L.linear = pr.linear;
      L.key_offset = key_total;
      L.q = std::min(q_max, h.n);
      L.kept = mem[l].fresh[h.parity];
      L.fresh = mem[l].fresh[1 - h.parity];
      host[l].parity = 1 - h.parity;
      key_total += 2 * int64_t{h.n};
      chunks = std::max(chunks, selection_chunks(h.n));
    }
    AE_CUDA_CHECK(cudaMemcpyAsync(d_lanes, lane_args.get(), sizeof(Lane) * A, cudaMemcpyHostToDevice, s));
    select_working_sets(d_lanes, A, chunks, key_total, selection, s);
    AE_CUDA_CHECK(cudaMemcpyAsync(readback.get(), d_readback, sizeof(Readback) * lanes, cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(cudaStreamSynchronize(s));

    // ---- the host: stop or go on; the cache's slots; the rows to compute ----
    std::vector<int> solving;  // indices into active
    std::vector<int> finished;
    for (int a = 0; a < A; ++a) {
      LaneHost& h = host[active[a]];
      const Readback& rb = readback[active[a]];
      const double gap = rb.gap[0] + rb.gap[1];
      const bool converged = !(gap >= config.tol) || rb.count < 2;
      if (converged && !h.float64_gradient && h.refreshes < kMaxFloat64Refreshes) {
        refresh_float64(active[a]);  // its next selection tests the float64 gradient
        continue;
      }
      // Stalled: the last subproblem could take no step (its gap was below its tolerance).
      if (converged || h.iterations >= h.max_iter || h.stalled) {
        h.hit_limit = gap >= config.tol && (h.iterations >= h.max_iter || h.stalled);
        finished.push_back(a);
        continue;
      }
      solving.push_back(a);
    }
    // Finished lanes: rho and the objective over their variables, then their multipliers.
    if (!finished.empty()) {
      for (size_t f = 0; f < finished.size(); ++f) finish_args[f] = lane_args[finished[f]];
      const int F = static_cast<int>(finished.size());
      AE_CUDA_CHECK(cudaMemcpyAsync(d_lanes, finish_args.get(), sizeof(Lane) * F, cudaMemcpyHostToDevice, s));
      finish_kernel<<<F, kFinishThreads, 0, s>>>(d_lanes, d_results);
      AE_CUDA_LAUNCH_CHECK();
      AE_CUDA_CHECK(cudaMemcpyAsync(result_args.get(), d_results, sizeof(PairResult) * F, cudaMemcpyDeviceToHost, s));
      for (int f = 0; f < F; ++f) {
        const int l = active[finished[f]];
        WorkingSetOutcome& o = out[host[l].pair];
        o.alpha.resize(static_cast<size_t>(host[l].n));
        AE_CUDA_CHECK(cudaMemcpyAsync(o.alpha.data(), mem[l].alpha, sizeof(double) * host[l].n,
                                      cudaMemcpyDeviceToHost, s));
      }
      AE_CUDA_CHECK(cudaStreamSynchronize(s));
      for (int f = 0; f < F; ++f) {
        const int l = active[finished[f]];
        LaneHost& h = host[l];
        WorkingSetOutcome& o = out[h.pair];
        o.result = result_args[f];
        o.result.iterations = h.iterations;
        o.result.hit_iteration_limit = h.hit_limit ? 1 : 0;
        o.rounds = h.rounds;
        o.rows_computed = h.rows_computed;
        o.refreshes = h.refreshes;
        o.refreshed_columns = h.refreshed_columns;
        if (totals) {
          totals->rounds += h.rounds;
          totals->rows_computed += h.rows_computed;
          totals->refreshes += h.refreshes;
          totals->refreshed_columns += h.refreshed_columns;
        }
        if (on_pair_done) on_pair_done(++done);
        start_pair(l);  // its first round is the next
      }
    }
    if (solving.empty()) continue;

    // ---- steps 3-5 for the lanes that go on ----
    const int S = static_cast<int>(solving.size());
    for (int k = 0; k < S; ++k) {
      const int a = solving[k], l = active[a];
      LaneHost& h = host[l];
      const WorkingSetPair& pr = pairs[h.pair];
      const Readback& rb = readback[active[a]];
      cache_rows(l, rb.ws, rb.count, k);
      Lane& L = lane_args[k];
      L = lane_args[a];  // the selection's state (lane_state), now with its working set
      L.count = rb.count;
      int positives = 0;
      while (positives < rb.count && rb.ws[positives] < h.na) ++positives;
      PairJob& job = job_args[k];
      job = PairJob{};
      job.K = mem[l].Kws;
      job.ld = rb.count;
      job.diag = mem[l].diag_ws;
      job.off_a = 0;
      job.off_b = positives;
      job.na = positives;
      job.nb = rb.count - positives;
      job.weight_a = pr.Cp;  // the launch's C is 1
      job.weight_b = pr.Cn;
      job.alpha = mem[l].alpha_ws;
      job.G = mem[l].G_ws;
      job.status = mem[l].status;
      job.G_start = mem[l].G_ws;
      job.linear = -1;
      job.tol = std::max(config.tol, config.inner_gap_share * (rb.gap[0] + rb.gap[1]));
      job.max_iter = std::min<long long>(static_cast<long long>(config.inner_steps_per_variable) * rb.count,
                                         h.max_iter - h.iterations);
      ++h.rounds;
      h.float64_gradient = false;
    }
    AE_CUDA_CHECK(cudaMemcpyAsync(d_slots, slot_args.get(), sizeof(int) * lanes * kMaxWorkingSet,
                                  cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_lanes, lane_args.get(), sizeof(Lane) * S, cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_jobs, job_args.get(), sizeof(PairJob) * S, cudaMemcpyHostToDevice, s));
    subproblem_kernel<<<dim3(static_cast<unsigned>(q_rows), S), 256, 0, s>>>(d_lanes);
    AE_CUDA_LAUNCH_CHECK();
    solve_pairs(d_jobs, S, d_results, 1.0, config.tol, 0, rbf != 0, smo_state_bytes(q_rows), q_rows, s);
    const int tiles = static_cast<int>((n_max + kUpdatePerBlock - 1) / kUpdatePerBlock);
    gradient_update_kernel<<<dim3(tiles, S), kUpdateThreads, 0, s>>>(d_lanes);
    AE_CUDA_LAUNCH_CHECK();
    AE_CUDA_CHECK(cudaMemcpyAsync(result_args.get(), d_results, sizeof(PairResult) * S, cudaMemcpyDeviceToHost, s));
    AE_CUDA_CHECK(cudaStreamSynchronize(s));
    for (int k = 0; k < S; ++k) {
      LaneHost& h = host[active[solving[k]]];
      h.iterations += result_args[k].iterations;
      h.stalled = result_args[k].iterations == 0;
    }
  }
  return out;
}

}  // namespace svm::cuda
