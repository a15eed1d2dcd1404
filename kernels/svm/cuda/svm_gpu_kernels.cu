// Device code of the GPU SVM: kernel-matrix passes around cuBLAS, the SMO solver (one
// persistent block per binary problem) and the decision-value combine. The solver mirrors
// kernels/svm/cpu/smo.cpp step for step (same selection rules, ties, clipping, stopping
// test and rho); only the arithmetic is spread over a thread block.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/smo_step.h"

namespace svm::cuda {

void throw_cublas(cublasStatus_t status, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("cuBLAS error: ") + cae::cublas::api().status_string(status) + " (" + what + " at " +
                           file + ":" + std::to_string(line) + ")");
}

namespace {

constexpr int kWarp = 32;

// Gradient and alpha (double) and flags (byte) per sample.
__host__ __device__ inline size_t state_bytes(int64_t n) {
  return static_cast<size_t>(n) * (2 * sizeof(double) + sizeof(uint8_t));
}

// ---- rows, norms, kernel values -------------------------------------------------------------

__global__ void row_norms_kernel(const float* __restrict__ X, int64_t n, int dim, int64_t ld,
                                 double* __restrict__ out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= n) return;
  const float* x = X + row * ld;
  double s = 0;
  for (int f = lane; f < dim; f += kWarp) {
    const double v = x[f];
    s += v * v;
  }
  for (int off = kWarp / 2; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) out[row] = s;
}

__global__ void scatter_rows_kernel(const float* __restrict__ X, const int64_t* __restrict__ places, int dim,
                                    int64_t ld, float* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const float* src = X + r * dim;
  float* dst = out + places[r] * ld;
  for (int64_t f = threadIdx.x; f < ld; f += blockDim.x) dst[f] = f < dim ? src[f] : 0.0f;
}

// x → (hi, lo), both TF32 values (a 10-bit significand: the low 13 bits of the float zero),
// hi the nearest to x (ties away, as cvt.rna.tf32) and lo the nearest to x − hi (exact in
// float). hi + lo is x to ~22 significant bits.
__device__ __forceinline__ float round_to_tf32(float x) { return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u); }

__global__ void split_tf32_kernel(float* __restrict__ x, float* __restrict__ lo, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i], hi = round_to_tf32(v);
    x[i] = hi;
    lo[i] = round_to_tf32(v - hi);
  }
}

__device__ __forceinline__ float rbf_value(double a_norm, double b_norm, float dot, double gamma) {
  const double d2 = a_norm + b_norm - 2.0 * static_cast<double>(dot);
  return static_cast<float>(exp(-gamma * fmax(d2, 0.0)));
}

// One 32x32 tile (bi, bj), bi <= bj, of the upper triangle: transform, write back, and write
// its transpose into tile (bj, bi). On diagonal tiles only the upper half is a source, so
// every element of the result has exactly one writer and M is exactly symmetric.
__global__ void symmetric_kernel_kernel(float* M, int64_t m, int64_t ld, const double* __restrict__ norms, int rbf,
                                        double gamma) {
  const int bi = blockIdx.y, bj = blockIdx.x;
  if (bi > bj) return;
  __shared__ float tile[32][33];
  const int64_t r0 = static_cast<int64_t>(bi) * 32, c0 = static_cast<int64_t>(bj) * 32;
  const int tx = threadIdx.x;
  for (int lr = threadIdx.y; lr < 32; lr += blockDim.y) {
    const int64_t r = r0 + lr, c = c0 + tx;
    float v = 0.f;
    if (r < m && c < m) {
      v = M[r * ld + c];
      if (rbf) v = r == c ? 1.0f : rbf_value(norms[r], norms[c], v, gamma);
    }
    tile[lr][tx] = v;
  }
  __syncthreads();
  for (int lr = threadIdx.y; lr < 32; lr += blockDim.y) {
    const int64_t r = r0 + lr, c = c0 + tx;
    if (r < m && c < m && (bi < bj || lr <= tx)) M[r * ld + c] = tile[lr][tx];
    const int64_t rr = c0 + lr, cc = r0 + tx;  // lower-triangle target, source tile[tx][lr]
    if (rr < m && cc < m && (bi < bj || tx < lr)) M[rr * ld + cc] = tile[tx][lr];
  }
}

__global__ void extract_diagonal_kernel(const float* __restrict__ M, int64_t m, int64_t ld, double* __restrict__ diag) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < m) diag[t] = M[t * ld + t];
}

__global__ void kernel_from_dots_kernel(const float* __restrict__ dots, int64_t rows, int64_t cols,
                                        const double* __restrict__ row_norms, const double* __restrict__ col_norms,
                                        int rbf, double gamma, double* __restrict__ out) {
  const int64_t total = rows * cols;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e - r * cols;
    const float d = dots[e];
    out[e] = rbf ? static_cast<double>(rbf_value(row_norms[r], col_norms[c], d, gamma)) : static_cast<double>(d);
  }
}

// Thread t walks s in order, reading row s (coalesced across t; K is symmetric).
__global__ void weighted_row_sums_kernel(const float* __restrict__ K, int64_t n, int64_t ld,
                                         const double* __restrict__ w, int64_t count, double* __restrict__ out) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double g = 0;
    for (int64_t s = 0; s < count; ++s) g = __dadd_rn(g, __dmul_rn(w[s], static_cast<double>(K[s * ld + t])));
    out[t] = g;
  }
}

__global__ void combine_decisions_kernel(const double* __restrict__ T, int64_t rows, int k,
                                         const double* __restrict__ rho, double* __restrict__ dec) {
  const int pairs = k * (k - 1) / 2;
  const int64_t total = rows * pairs;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t x = e / pairs;
    int p = static_cast<int>(e - x * pairs);
    const int pair = p;
    int a = 0;
    while (p >= k - 1 - a) {  // pair index → (a, b) in libsvm's order
      p -= k - 1 - a;
      ++a;
    }
    const int b = a + 1 + p;
    const double* t = T + x * k * (k - 1);
    // Class a's vectors carry their coefficient for (a, b) in row b-1, class b's in row a.
    dec[e] = t[a * (k - 1) + (b - 1)] + t[b * (k - 1) + a] - rho[pair];
  }
}

// ---- the SMO solver ------------------------------------------------------------------------

constexpr int kSmoThreads = 512;
// Kernel values per thread and row whose loads are issued together. A round covers 10,240
// samples, so a pair of two CIFAR-10 classes (10,000) takes one, and the row K_i loaded to
// choose j is still in registers for the update, which then loads only K_j. Measured on an
// H200 (docs/BENCHMARKS.md): 20 beats 16 (two rounds, K_i loaded twice), 24 and 32 (one
// round, but more of the block's registers spilled).
constexpr int kUnroll = 20;
constexpr uint8_t kPositive = 1, kAtLower = 2, kAtUpper = 4;

__device__ __forceinline__ bool in_up(uint8_t s) { return (s & kPositive) ? !(s & kAtUpper) : !(s & kAtLower); }
__device__ __forceinline__ bool in_low(uint8_t s) { return (s & kPositive) ? !(s & kAtLower) : !(s & kAtUpper); }
__device__ __forceinline__ uint8_t status_of(bool positive, double a, double C) {
  return static_cast<uint8_t>((positive ? kPositive : 0) | (a <= 0 ? kAtLower : 0) | (a >= C ? kAtUpper : 0));
}

// Arg-max with ties to the larger index — the CPU loop's `>=` over ascending t — plus a max
// of a side value. Order-independent, so the reduction tree does not matter.
// kv rides along with idx: the winner's K(i, idx), so the serial step needs no global load.
struct Pick {
  double key;
  int idx;
  float kv;
  double aux;
};

__device__ __forceinline__ void take(Pick& p, double key, int idx, float kv, double aux) {
  if (key > p.key || (key == p.key && idx > p.idx)) {
    p.key = key;
    p.idx = idx;
    p.kv = kv;
  }
  p.aux = fmax(p.aux, aux);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

__device__ __forceinline__ Pick no_pick() { return Pick{-kInf, -1, 0.f, -kInf}; }

__device__ __forceinline__ void warp_pick(Pick& p) {
  for (int off = kWarp / 2; off > 0; off >>= 1) {
    const double k = __shfl_down_sync(0xffffffffu, p.key, off);
    const int i = __shfl_down_sync(0xffffffffu, p.idx, off);
    const float v = __shfl_down_sync(0xffffffffu, p.kv, off);
    const double a = __shfl_down_sync(0xffffffffu, p.aux, off);
    take(p, k, i, v, a);
  }
}

// Block-wide pick; every thread gets the result. scratch: 33 entries of shared memory. Two
// barriers: the next call's writes to scratch[0..31] come after every thread has passed
// this call's second barrier, by which point warp 0 has finished reading them.
__device__ Pick block_pick(Pick p, Pick* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  warp_pick(p);
  if (lane == 0) scratch[warp] = p;
  __syncthreads();
  if (warp == 0) {
    Pick q = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : no_pick();
    warp_pick(q);
    if (lane == 0) scratch[32] = q;
  }
  __syncthreads();
  return scratch[32];
}

__device__ double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double q = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : 0.0;
    for (int off = kWarp / 2; off > 0; off >>= 1) q += __shfl_down_sync(0xffffffffu, q, off);
    if (lane == 0) scratch[32] = q;
  }
  __syncthreads();
  const double r = scratch[32];
  __syncthreads();  // scratch is reused at once by the caller
  return r;
}

// One unrolled round of kernel values from row Kr: this thread's samples t = base + u·B,
// u < kUnroll (those below n).
template <typename Map>
__device__ __forceinline__ void load_round(const float* __restrict__ Kr, int base, int B, int n, const Map& map,
                                           float (&k)[kUnroll]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int t = base + u * B;
    if (t < n) k[u] = __ldg(Kr + map(t));
  }
}

// One block solves one pair. Thread `tid` owns samples t = tid + k*blockDim. The gradient,
// alpha and a flag byte per sample live in shared memory when the pair fits (17 bytes a
// sample: up to ~13,000 samples on Hopper), else in the job's global arrays (same code,
// through generic pointers). kAllOnChip: every job's state fits, known at compile time, so
// the state is addressed as shared memory (generic loads are slower). Each pass first
// issues the loads of its kernel values (the only global traffic), then works on shared
// memory.
template <bool kUnitDiagonal, bool kAllOnChip>
__global__ void __launch_bounds__(kSmoThreads, 1)
    smo_kernel(const PairJob* __restrict__ jobs, PairResult* __restrict__ results, double C, double tol,
               long long max_iter, size_t smem_bytes) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ Pick scratch[33];
  __shared__ double sum_scratch[33];
  __shared__ double s_ci, s_cj;

  const PairJob job = jobs[blockIdx.x];
  const int na = job.na, n = job.na + job.nb;
  // Each class's bound: libsvm's weighted C (C · 1 is C exactly, so unweighted fits are unchanged).
  const double Cp = C * job.weight_a, Cn = C * job.weight_b;
  const bool state_on_chip = kAllOnChip || state_bytes(n) <= smem_bytes;
  double* G = state_on_chip ? reinterpret_cast<double*>(smem) : job.G;
  double* alpha = state_on_chip ? reinterpret_cast<double*>(smem) + n : job.alpha;
  uint8_t* st = state_on_chip ? smem + static_cast<size_t>(n) * 2 * sizeof(double) : job.status;
  const float* __restrict__ K = job.K;
  const int64_t off_a = job.off_a, off_b_minus_na = job.off_b - na;
  auto map = [&](int t) -> int64_t { return t < na ? off_a + t : off_b_minus_na + t; };
  auto diag = [&](int t) -> double { return kUnitDiagonal ? 1.0 : job.diag[map(t)]; };
  const int tid = threadIdx.x, B = blockDim.x;

  const bool warm = job.G_start != nullptr;
  for (int t = tid; t < n; t += B) {
    const double a0 = warm ? job.alpha[t] : 0.0;
    G[t] = warm ? job.G_start[t] : -1.0;
    alpha[t] = a0;
    st[t] = status_of(t < na, a0, t < na ? Cp : Cn);
  }
  __syncthreads();

  // First i: argmax of -y_t G_t over I_up.
  Pick p = no_pick();
  for (int t = tid; t < n; t += B) {
    const uint8_t s = st[t];
    if (in_up(s)) take(p, ((s & kPositive) ? 1.0 : -1.0) * -G[t], t, 0.f, -kInf);
  }
  Pick r = block_pick(p, scratch);
  int i = r.idx;
  double Gmax = r.key;

  // As the CPU solver: at most max(10^7, 100 n) iterations unless the caller sets a limit.
  const long long limit = job.max_iter > 0 ? job.max_iter
                          : max_iter > 0   ? max_iter
                                           : max(10000000LL, n > INT_MAX / 100 ? INT_MAX : 100LL * n);
  if (job.tol > 0) tol = job.tol;
  long long iter = 0;
  int hit_limit = 0;
  float ki[kUnroll], kj[kUnroll];
  while (i >= 0) {
    const float* __restrict__ Ki = K + map(i) * job.ld;
    const double Kii = diag(i);

    // j: the best second-order decrease over I_low; aux = max over I_low of y_t G_t. The
    // rounds run upwards; the last one's K_i values stay in ki for the update pass.
    const int round_span = B * kUnroll, last_base = tid + (n - 1) / round_span * round_span;
    p = no_pick();
    for (int base = tid; base < n; base += round_span) {
      load_round(Ki, base, B, n, map, ki);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * B;
        if (t >= n) break;
        const uint8_t sv = st[t];
        if (in_low(sv)) {
          const double v = ((sv & kPositive) ? 1.0 : -1.0) * G[t];
          const double b = Gmax + v;
          double key = -kInf;
          int idx = -1;
          if (b > 0) {
            double a = Kii + diag(t) - 2.0 * static_cast<double>(ki[u]);
            if (a <= 0) a = cpu::kSmoTau;
            key = (b * b) / a;  // = -(decrease); max key = min decrease
            idx = t;
          }
          take(p, key, idx, ki[u], v);
        }
      }
    }
    r = block_pick(p, scratch);
    const int j = r.idx;
    const double Gmax2 = r.aux;
    if (Gmax + Gmax2 < tol || j < 0) break;
    if (iter >= limit) {
      hit_limit = 1;
      break;
    }
    ++iter;
    const float* __restrict__ Kj = K + map(j) * job.ld;

    // The update pass's first round (the j-pass's last) needs only K_j, requested before the
    // serial step so that its latency overlaps it.
    load_round(Kj, last_base, B, n, map, kj);

    if (tid == 0) {
      // The two-variable step, clipped variable by variable exactly as the CPU solver.
      const bool pi = (st[i] & kPositive) != 0, pj = (st[j] & kPositive) != 0;
      const double yi = pi ? 1.0 : -1.0, yj = pj ? 1.0 : -1.0;
      const double Gi = G[i], Gj = G[j];
      const double old_ai = alpha[i], old_aj = alpha[j];
      const double Ci = pi ? Cp : Cn, Cj = pj ? Cp : Cn;
      const cpu::PairStep step = cpu::smo_pair_step(pi == pj, Gi, Gj, old_ai, old_aj, Kii, diag(j), r.kv, Ci, Cj);  // r.kv = K(i, j)
      const double ai = step.ai, aj = step.aj;
      alpha[i] = ai;
      alpha[j] = aj;
      st[i] = status_of(pi, ai, Ci);
      st[j] = status_of(pj, aj, Cj);
      s_ci = yi * (ai - old_ai);
      s_cj = yj * (aj - old_aj);
    }
    __syncthreads();
    const double ci = s_ci, cj = s_cj;

    // G_t += y_t (ci K_it + cj K_jt), fused with the next pick of i (whose ties do not
    // depend on the order, so the rounds may run downwards).
    p = no_pick();
    for (int base = last_base; base >= 0; base -= round_span) {
      if (base != last_base) {
        load_round(Ki, base, B, n, map, ki);
        load_round(Kj, base, B, n, map, kj);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * B;
        if (t >= n) break;
        const uint8_t sv = st[t];
        const double y = (sv & kPositive) ? 1.0 : -1.0;
        // Spelled out without contraction, as the CPU computes it.
        const double step = __dadd_rn(__dmul_rn(ci, static_cast<double>(ki[u])),
                                      __dmul_rn(cj, static_cast<double>(kj[u])));
        const double g = __dadd_rn(G[t], __dmul_rn(y, step));
        G[t] = g;
        if (in_up(sv)) take(p, -y * g, t, 0.f, -kInf);
      }
    }
    r = block_pick(p, scratch);
    i = r.idx;
    Gmax = r.key;
  }
  __syncthreads();  // the serial step's last writes are visible to all

  // rho: mean of y_t G_t over free vectors, else the midpoint of the bounded ones' interval.
  double ub = kInf, lb = -kInf, free_sum = 0, free_count = 0, obj = 0;
  for (int t = tid; t < n; t += B) {
    const uint8_t s = st[t];
    const bool positive = (s & kPositive) != 0;
    const double yG = (positive ? 1.0 : -1.0) * G[t];
    if (s & kAtUpper) {
      if (!positive) ub = fmin(ub, yG); else lb = fmax(lb, yG);
    } else if (s & kAtLower) {
      if (positive) ub = fmin(ub, yG); else lb = fmax(lb, yG);
    } else {
      free_count += 1;
      free_sum += yG;
    }
    obj += alpha[t] * (G[t] + job.linear);
    if (state_on_chip) job.alpha[t] = alpha[t];
  }
  free_sum = block_sum(free_sum, sum_scratch);
  free_count = block_sum(free_count, sum_scratch);
  obj = block_sum(obj, sum_scratch);
  ub = -block_pick(Pick{-ub, 0, 0.f, -kInf}, scratch).key;
  lb = block_pick(Pick{lb, 0, 0.f, -kInf}, scratch).key;
  if (tid == 0) {
    PairResult res;
    res.rho = free_count > 0 ? free_sum / free_count : (ub + lb) / 2;
    res.objective = obj / 2;
    res.iterations = iter;
    res.hit_iteration_limit = hit_limit;
    res.n_free = static_cast<int>(free_count);
    results[blockIdx.x] = res;
  }
}

}  // namespace

// ---- launchers ------------------------------------------------------------------------------

namespace {
int grid_for(int64_t total, int threads) {
  return static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, int64_t{1} << 20));
}
}  // namespace

int64_t device_row_stride(int dim) {
  constexpr int64_t kFloats = 32;
  return (static_cast<int64_t>(dim) + kFloats - 1) / kFloats * kFloats;
}

void row_squared_norms(const float* X, int64_t n, int dim, int64_t ld, double* out, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kRowsPerBlock = 8;
  const int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  row_norms_kernel<<<static_cast<unsigned>(blocks), kRowsPerBlock * kWarp, 0, stream>>>(X, n, dim, ld, out);
  AE_CUDA_LAUNCH_CHECK();
}

void split_tf32(float* x, float* lo, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, int64_t{1} << 16);
  split_tf32_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(x, lo, count);
  AE_CUDA_LAUNCH_CHECK();
}

void scatter_rows(const float* X, const int64_t* places, int64_t n, int dim, int64_t ld, float* out,
                  cudaStream_t stream) {
  if (n == 0) return;
  if (ld < dim) throw std::invalid_argument("scatter_rows: a row stride shorter than the row");
  scatter_rows_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(X, places, dim, ld, out);
  AE_CUDA_LAUNCH_CHECK();
}

void symmetric_kernel_from_dots(float* M, int64_t m, int64_t ld, const double* norms, KernelType kernel,
                                double gamma, cudaStream_t stream) {
  if (m == 0) return;
  const unsigned tiles = static_cast<unsigned>((m + 31) / 32);
  if (tiles > 65535) throw std::runtime_error("svm gpu: kernel matrix too large for the tile grid");
  symmetric_kernel_kernel<<<dim3(tiles, tiles), dim3(32, 8), 0, stream>>>(M, m, ld, norms,
                                                                         kernel == KernelType::rbf ? 1 : 0, gamma);
  AE_CUDA_LAUNCH_CHECK();
}

void extract_diagonal(const float* M, int64_t m, int64_t ld, double* diag, cudaStream_t stream) {
  if (m == 0) return;
  extract_diagonal_kernel<<<static_cast<unsigned>((m + 255) / 256), 256, 0, stream>>>(M, m, ld, diag);
  AE_CUDA_LAUNCH_CHECK();
}

void kernel_from_dots(const float* dots, int64_t rows, int64_t cols, const double* row_norms, const double* col_norms,
                      KernelType kernel, double gamma, double* out, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  kernel_from_dots_kernel<<<grid_for(rows * cols, 256), 256, 0, stream>>>(
      dots, rows, cols, row_norms, col_norms, kernel == KernelType::rbf ? 1 : 0, gamma, out);
  AE_CUDA_LAUNCH_CHECK();
}

void weighted_row_sums(const float* K, int64_t n, int64_t ld, const double* w, int64_t count, double* out,
                       cudaStream_t stream) {
  if (n == 0) return;
  weighted_row_sums_kernel<<<grid_for(n, 256), 256, 0, stream>>>(K, n, ld, w, count, out);
  AE_CUDA_LAUNCH_CHECK();
}

void combine_decisions(const double* T, int64_t rows, int k, const double* rho, double* dec, cudaStream_t stream) {
  if (rows == 0) return;
  combine_decisions_kernel<<<grid_for(rows * (k * (k - 1) / 2), 256), 256, 0, stream>>>(T, rows, k, rho, dec);
  AE_CUDA_LAUNCH_CHECK();
}

size_t smo_state_bytes(int64_t n) { return state_bytes(n); }

size_t smo_max_shared_bytes() {
  int device = 0, optin = 0;
  AE_CUDA_CHECK(cudaGetDevice(&device));
  AE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attr{};
  AE_CUDA_CHECK(cudaFuncGetAttributes(&attr, smo_kernel<true, false>));
  const size_t static_bytes = attr.sharedSizeBytes;
  const size_t reserve = 1024;
  return static_cast<size_t>(optin) > static_bytes + reserve ? static_cast<size_t>(optin) - static_bytes - reserve : 0;
}

void solve_pairs(const PairJob* jobs, int n_jobs, PairResult* results, double C, double tol, long long max_iter,
                 bool unit_diagonal, size_t smem_bytes, int64_t largest_pair, cudaStream_t stream) {
  if (n_jobs == 0) return;
  auto launch = [&](auto kernel) {
    AE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)));
    kernel<<<n_jobs, kSmoThreads, smem_bytes, stream>>>(jobs, results, C, tol, max_iter, smem_bytes);
    AE_CUDA_LAUNCH_CHECK();
  };
  const bool on_chip = smem_bytes >= state_bytes(largest_pair);
  if (unit_diagonal)
    on_chip ? launch(smo_kernel<true, true>) : launch(smo_kernel<true, false>);
  else
    on_chip ? launch(smo_kernel<false, true>) : launch(smo_kernel<false, false>);
}

}  // namespace svm::cuda
