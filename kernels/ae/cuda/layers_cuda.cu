// The small GPU kernels around the GEMMs: input im2col, the folded output gradient, weight
// packing, bias gradients, optimizers. (The CPU twins on device pointers, which only the
// tests call, are tests/gpu/support/layer_twins.cuh.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/fast_divmod.cuh"
#include "kernels/ae/cuda/ops.cuh"
#include "kernels/ae/cuda/mma_ptx.cuh"

namespace ae::cuda {
namespace {

using bf16 = __nv_bfloat16;
using ptx::load8;
using ptx::load_f;
using ptx::store_f;

constexpr int kThreads = 256;
unsigned blocks_for(int64_t n, int threads = kThreads) { return unsigned((n + threads - 1) / threads); }

// ---- input -------------------------------------------------------------------------------
// im2col_pitch() at compile time: the smallest power of two ≥ max(8, 9·C + 1).
constexpr int im2col_pitch_of(int C) {
  int p = 8;
  while (p < 9 * C + 1) p <<= 1;
  return p;
}

// A thread builds one pixel's row in shared memory (the unrolled loop makes its 9·C taps'
// offsets constants); the block then writes its pixels' rows, contiguous in `col`, as
// consecutive 16-byte stores. Each thread storing its own row to global memory (16-byte
// pieces one row apart in every warp-wide store) ran the fp32 matrix well below the memory's
// speed; splitting the rows over threads instead cost bf16 more in per-column index
// arithmetic than it won (docs/BENCHMARKS.md, "The weight pack, Adam's grid, the input
// im2col, the epilogue tile's pitch").
constexpr int kIm2colThreads = 128;
template <typename T, int C>
__global__ void __launch_bounds__(kIm2colThreads)
    im2col_input_kernel(const uint8_t* __restrict__ images, const int* __restrict__ order,
                        const int* __restrict__ order_pos, int ahead, const int* __restrict__ order_end, int pixels,
                        int H, int W, FastDivmod div_w, FastDivmod div_hw, T* __restrict__ col) {
  constexpr int PITCH = im2col_pitch_of(C), PIECES = PITCH * int(sizeof(T)) / 16;
  // A row padded by 16 bytes: PIECES + 1 is odd, so eight consecutive threads' 16-byte
  // stores of a row piece fall in eight different bank groups.
  constexpr int SROW = (PIECES + 1) * 16;
  static_assert(PIECES % 2 == 0, "im2col rows: an even number of 16-byte pieces");
  __shared__ __align__(16) unsigned char rows[kIm2colThreads * SROW];
  const int first = (order_pos ? *order_pos : 0) + ahead;  // the batch's first order position
  if (order_end) {  // the pixels of images at order positions before *order_end
    const int64_t images_left = int64_t(*order_end) - first;
    const int64_t left = images_left > 0 ? images_left * div_hw.d : 0;
    if (left < pixels) pixels = int(left);
  }
  const int pix0 = int(blockIdx.x) * kIm2colThreads, pix = pix0 + int(threadIdx.x);
  if (pix0 >= pixels) return;  // the whole block
  if (pix < pixels) {
    int img, r, y, x;
    div_hw.divmod(pix, img, r);
    div_w.divmod(r, y, x);
    const int idx = order ? order[first + img] : img;
    const size_t plane = size_t(H) * W;
    const uint8_t* im = images + size_t(idx) * C * plane;
    alignas(16) T v[PITCH];
#pragma unroll
    for (int t = 0; t < 9; ++t) {
      const int yy = y + t / 3 - 1, xx = x + t % 3 - 1;
      const bool in = unsigned(yy) < unsigned(H) && unsigned(xx) < unsigned(W);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const float f = in ? float(im[c * plane + size_t(yy) * W + xx]) * (1.f / 255.f) : 0.f;
        store_f(&v[t * C + c], f);
      }
    }
    store_f(&v[9 * C], 1.f);  // the bias's column
#pragma unroll
    for (int j = 9 * C + 1; j < PITCH; ++j) store_f(&v[j], 0.f);
    uint4* srow = reinterpret_cast<uint4*>(rows + threadIdx.x * SROW);
#pragma unroll
    for (int j = 0; j < PIECES; ++j) srow[j] = reinterpret_cast<const uint4*>(v)[j];
  }
  __syncthreads();
  const int pieces = min(kIm2colThreads, pixels - pix0) * PIECES;
  uint4* dst = reinterpret_cast<uint4*>(col + size_t(pix0) * PITCH);
  for (int j = int(threadIdx.x); j < pieces; j += kIm2colThreads)
    dst[j] = *reinterpret_cast<const uint4*>(rows + (j / PIECES) * SROW + (j % PIECES) * 16);
}

template <typename T, int C>
void launch_im2col(const uint8_t* images, const int* order, const int* order_pos, int ahead, const int* order_end,
                   int pixels, int H, int W, void* col, cudaStream_t stream) {
  im2col_input_kernel<T, C><<<blocks_for(pixels, kIm2colThreads), kIm2colThreads, 0, stream>>>(
      images, order, order_pos, ahead, order_end, pixels, H, W, FastDivmod(W), FastDivmod(H * W), static_cast<T*>(col));
}

template <typename T>
void dispatch_im2col(const uint8_t* images, const int* order, const int* order_pos, int ahead, const int* order_end,
                     int pixels, int C, int H, int W, void* col, cudaStream_t stream) {
  switch (C) {
    case 1: launch_im2col<T, 1>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    case 2: launch_im2col<T, 2>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    case 3: launch_im2col<T, 3>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    case 4: launch_im2col<T, 4>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    case 5: launch_im2col<T, 5>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    case 6: launch_im2col<T, 6>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    case 7: launch_im2col<T, 7>(images, order, order_pos, ahead, order_end, pixels, H, W, col, stream); break;
    default: throw std::invalid_argument("im2col_input: at most 7 input channels, got " + std::to_string(C));
  }
}

// ---- folded output gradient of an up2 layer (see up2_fold_output_grad) -----------------
// One thread per (low-res pixel, column). Output row Y reads upsampled row Y+ky−1, i.e.
// source row (Y+ky−1)>>1: source row qy is read by tap ky from rows 2qy+1−ky and 2qy+2−ky.
template <typename T>
__global__ void up2_fold_kernel(const T* __restrict__ dy, int ldd, int K, int64_t pixels, int H, int W,
                                FastDivmod div_w, FastDivmod div_hw, T* __restrict__ g, int ldg) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= pixels * ldg) return;
  const int col = int(i % ldg);
  const int q = int(i / ldg);
  float sum = 0.f;
  if (col < 9 * K) {
    const int t = col / K, k = col % K, ky = t / 3, kx = t % 3;
    int img, r, qy, qx;
    div_hw.divmod(q, img, r);
    div_w.divmod(r, qy, qx);
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      const int Y = 2 * qy + 1 - ky + a;
      if (unsigned(Y) >= unsigned(2 * H)) continue;
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int X = 2 * qx + 1 - kx + b;
        if (unsigned(X) < unsigned(2 * W)) sum += load_f(dy + ((size_t(img) * 2 * H + Y) * 2 * W + X) * ldd + k);
      }
    }
  }
  store_f(g + i, sum);
}

// ---- weight packing ----------------------------------------------------------------------
// The 3×3 rows ky (or columns kx) that output parity d folds into 2×2 tap a:
// d = 0: a = 0 → {0}, a = 1 → {1, 2};  d = 1: a = 0 → {0, 1}, a = 1 → {2}.
__device__ __forceinline__ void parity_taps(int d, int a, int& lo, int& hi) {
  lo = (a == 0) ? 0 : (d == 0 ? 1 : 2);
  hi = (a == 0) ? (d == 0 ? 0 : 1) : 2;
}

// A thread loads the nine taps w[k][c][·][·] of one (k, c) and writes every element of one
// packed matrix (blockIdx.y) that they make, in the sums' fixed order. One thread per packed
// element, gathering its taps, spent the pack's time waiting on those scattered loads: ~2 M
// elements (Nsight; docs/BENCHMARKS.md, "The weight pack, Adam's grid, the input im2col,
// the epilogue tile's pitch"). Consecutive threads write consecutive
// columns: c runs fastest for the [out][tap][in] layouts, k for the transposed ones. The
// padding is never written: it stays as the allocation zeroed it.
template <typename T>
__global__ void pack_kernel(const float* __restrict__ params, PackList list) {
  const PackedWeights& p = list.item[blockIdx.y];
  const int K = p.K, C = p.C, g = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (g >= K * C) return;  // K·C ≤ the packed matrix's size < 2^31 (pack_weights checks)
  const bool transposed = p.kind == PackKind::bwd3 || p.kind == PackKind::bwd_down2_4x4;
  const int k = transposed ? g % K : g / C, c = transposed ? g / K : g % C;
  const float* src = params + p.weight_offset + (size_t(k) * C + c) * 9;
  float w[9];
#pragma unroll
  for (int j = 0; j < 9; ++j) w[j] = src[j];
  T* dst = static_cast<T*>(p.dst);
  const size_t kp = size_t(p.kpad), pitch = size_t(p.pitch);
  switch (p.kind) {
    case PackKind::fwd3:
#pragma unroll
      for (int t = 0; t < 9; ++t) store_f(dst + k * kp + t * pitch + c, w[t]);
      break;
    case PackKind::fwd_im2col:
#pragma unroll
      for (int t = 0; t < 9; ++t) store_f(dst + k * kp + size_t(t) * C + c, w[t]);
      break;
    case PackKind::bwd3:
#pragma unroll
      for (int t = 0; t < 9; ++t) store_f(dst + c * kp + t * pitch + k, w[8 - t]);
      break;
    case PackKind::fwd_up2_parity:
#pragma unroll
      for (int par = 0; par < 4; ++par)
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          int ylo, yhi, xlo, xhi;
          parity_taps(par >> 1, t >> 1, ylo, yhi);
          parity_taps(par & 1, t & 1, xlo, xhi);
          float s = 0.f;
          for (int ky = ylo; ky <= yhi; ++ky)
            for (int kx = xlo; kx <= xhi; ++kx) s += w[ky * 3 + kx];
          store_f(dst + (size_t(par) * K + k) * kp + t * pitch + c, s);
        }
      break;
    case PackKind::fwd_up2_subpixel:
      // Output row 2y+dy, tap ky reads upsampled row 2y+dy+ky−1 = source row y+((dy+ky−1)>>1):
      // source tap a = ((dy+ky−1)>>1)+1 ∈ {0,1,2}.
#pragma unroll
      for (int par = 0; par < 4; ++par)
#pragma unroll
        for (int t = 0; t < 9; ++t) {
          const int a = t / 3, b = t % 3, dy = par >> 1, dx = par & 1;
          float s = 0.f;
#pragma unroll
          for (int ky = 0; ky < 3; ++ky)
#pragma unroll
            for (int kx = 0; kx < 3; ++kx)
              if (((dy + ky + 1) >> 1) == a && ((dx + kx + 1) >> 1) == b) s += w[ky * 3 + kx];
          store_f(dst + (size_t(par) * K + k) * kp + t * pitch + c, s);
        }
      break;
    case PackKind::bwd_down2_4x4:
#pragma unroll
      for (int t = 0; t < 16; ++t) {
        const int a = t >> 2, b = t & 3;
        float s = 0.f;
#pragma unroll
        for (int dy = 0; dy < 2; ++dy)
#pragma unroll
          for (int dx = 0; dx < 2; ++dx) {
            const int ky = dy + 2 - a, kx = dx + 2 - b;
            if (ky >= 0 && ky < 3 && kx >= 0 && kx < 3) s += w[ky * 3 + kx];
          }
        store_f(dst + c * kp + t * pitch + k, s);
      }
      break;
  }
}

// ---- optimizers (PyTorch semantics, as kernels/ae/cpu/layers.h) ---------------------------------
struct OptK {
  float beta1, beta2, eps, weight_decay, momentum, grad_clip;
};

__device__ __forceinline__ float clipped_grad(const OptimizerDeviceState& s, float clip, int64_t i) {
  float g = s.grad[i];
  if (clip > 0.f) {
    const double norm = sqrt(*s.grad_sumsq);
    if (norm > clip) g = float(double(g) * (clip / (norm + 1e-6)));
  }
  return g;
}

// Nsight: with a block per 256 parameters (2,938 for the seed model) the adam kernel's
// warps spent much of their time at the barrier behind thread 0's two double pow()
// (docs/GPU.md, "The optimizer stage").
constexpr unsigned kAdamBlocks = 1024;
__global__ void adam_kernel(OptimizerDeviceState s, int64_t count, OptK o) {
  // The bias corrections (double pow, as PyTorch computes them in Python floats) once per
  // block rather than once per parameter: on the FP64 pipe they cost more than the update.
  __shared__ float step_size, bc2_sqrt;
  if (threadIdx.x == 0) {
    const int64_t step = *s.step_counter + 1;
    const double bc1 = 1.0 - pow(double(o.beta1), double(step));
    const double bc2 = 1.0 - pow(double(o.beta2), double(step));
    step_size = float(double(*s.lr) / bc1);
    bc2_sqrt = float(sqrt(bc2));
  }
  __syncthreads();
  // Grid-strided over at most kAdamBlocks blocks: the per-block corrections above are
  // the barrier every other thread waits at.
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    float p = s.params[i];
    float g = clipped_grad(s, o.grad_clip, i);
    if (o.weight_decay != 0.f) g += o.weight_decay * p;
    const float m = o.beta1 * s.m[i] + (1.f - o.beta1) * g;
    const float v = o.beta2 * s.v[i] + (1.f - o.beta2) * g * g;
    s.m[i] = m;
    s.v[i] = v;
    const float denom = sqrtf(v) / bc2_sqrt + o.eps;
    p -= step_size * (m / denom);
    s.params[i] = p;
  }
}

__global__ void sgd_kernel(OptimizerDeviceState s, int64_t count, OptK o) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float lr = *s.lr;
  float p = s.params[i];
  float g = clipped_grad(s, o.grad_clip, i);
  if (o.weight_decay != 0.f) g += o.weight_decay * p;
  if (o.momentum != 0.f) {
    const float b = o.momentum * s.m[i] + g;
    s.m[i] = b;
    g = b;
  }
  p -= lr * g;
  s.params[i] = p;
}

// Adds the sum of `local` over a kThreads-thread block to *out (one atomic per block).
// Sums in double: these are loss and gradient-norm totals over millions of terms.
__device__ void block_sum_atomic_add(double local, double* out) {
  __shared__ double red[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = local;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0;
    for (int w = 0; w < kThreads / 32; ++w) s += red[w];
    atomicAdd(out, s);
  }
}

__global__ void sumsq_kernel(const float* __restrict__ x, int64_t count, double* out) {
  double local = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    local += double(x[i]) * x[i];
  block_sum_atomic_add(local, out);
}

__global__ void codes_to_halves_kernel(const float* __restrict__ codes, uint16_t* __restrict__ out, int64_t count,
                                       unsigned long long* first_bad) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float x = codes[i];
    const uint16_t h = __half_as_ushort(__float2half_rn(x));
    out[i] = h;
    if ((h & 0x7c00u) == 0x7c00u) atomicMin(first_bad + (isfinite(x) ? 1 : 0), static_cast<unsigned long long>(i));
  }
}

__global__ void advance_kernel(int* pos, int64_t* step, int batch) {
  *pos += batch;
  *step += 1;
}

// ---- bias gradient: column sums ----------------------------------------------------------
constexpr int kBiasBlocks = 256;
constexpr int kColsumUnroll = 4;

// 8 consecutive values of a row (ptx::load8), added into acc.
template <typename T>
__device__ __forceinline__ void add8(const T* p, float (&acc)[8]) {
  float v[8];
  load8(p, v);
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j] += v[j];
}

// Block b sums rows [b·span, (b+1)·span) of every column into work[b][0..ld). A thread owns
// 8 adjacent columns (one 16-byte bf16 / two fp32 vector loads per row) of every rows_par-th
// row, kColsumUnroll rows in flight in separate sums; then the block's row lanes are added
// in a fixed tree, so the result depends on the shape alone (deterministic). Reading one
// element per thread and row, with 256 blocks that each strode over the whole matrix, was
// bound by load latency, far below the memory system's rate (Nsight Compute; docs/GPU.md,
// "Bias gradients: column sums at the memory's speed").
template <typename T>
__global__ void __launch_bounds__(kThreads) colsum_partial_kernel(const T* __restrict__ src, int64_t rows, int ld,
                                                                  int64_t span, float* __restrict__ work) {
  __shared__ __align__(16) float part[kThreads * 8];
  const int tid = int(threadIdx.x), groups = ld / 8;
  const int64_t r0 = int64_t(blockIdx.x) * span, r1 = std::min<int64_t>(rows, r0 + span);
  for (int g0 = 0; g0 < groups; g0 += kThreads) {  // more than kThreads groups: ld > 2,048
    const int cg = groups - g0 < kThreads ? groups - g0 : kThreads;  // both are powers of two
    const int rows_par = kThreads / cg, g = tid % cg, lane_row = tid / cg;
    const T* col = src + (g0 + g) * 8;
    float acc[kColsumUnroll][8] = {};
    int64_t r = r0 + lane_row;
    for (; r + (kColsumUnroll - 1) * rows_par < r1; r += kColsumUnroll * rows_par)
#pragma unroll
      for (int u = 0; u < kColsumUnroll; ++u) add8(col + size_t(r + u * rows_par) * ld, acc[u]);
    for (; r < r1; r += rows_par) add8(col + size_t(r) * ld, acc[0]);
    float* mine = part + tid * 8;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float s = acc[0][j];
#pragma unroll
      for (int u = 1; u < kColsumUnroll; ++u) s += acc[u][j];
      mine[j] = s;
    }
    for (int step = rows_par / 2; step > 0; step /= 2) {
      __syncthreads();
      if (lane_row < step) {
        const float* other = part + (tid + step * cg) * 8;
#pragma unroll
        for (int j = 0; j < 8; ++j) mine[j] += other[j];
      }
    }
    __syncthreads();
    if (lane_row == 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) work[size_t(blockIdx.x) * ld + (g0 + g) * 8 + j] = mine[j];
    }
    __syncthreads();  // part is reused by the next column chunk
  }
}

// The partial sums of kFinalCols columns per block, kFinalShares threads per column (each
// summing every kFinalShares-th partial; then their shares in order): one thread per column
// summing all 256 partials alone was slow (a grid of one block for ≤ 256 columns, bound by
// the latency of 256 dependent loads; docs/BENCHMARKS.md, "Bias sums, the output layer's
// halo, svm-eval's hashes, the report's probe").
constexpr int kFinalCols = 32, kFinalShares = kThreads / kFinalCols;
__global__ void __launch_bounds__(kThreads) colsum_final_kernel(const float* __restrict__ work, int blocks, int ld,
                                                                  int ncols, float* out) {
  __shared__ float shares[kFinalShares][kFinalCols];
  const int col = int(blockIdx.x) * kFinalCols + int(threadIdx.x);
  float s = 0.f;
  if (col < ncols)
    for (int b = int(threadIdx.y); b < blocks; b += kFinalShares) s += work[size_t(b) * ld + col];
  shares[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < ncols) {
    for (int y = 1; y < kFinalShares; ++y) s += shares[y][threadIdx.x];
    out[col] = s;
  }
}

}  // namespace

// ---- fused-operation entry points ----------------------------------------------------------
int im2col_pitch(int C) {
  if (C < 1 || C > 7) throw std::invalid_argument("im2col_input: 1 to 7 input channels, got " + std::to_string(C));
  return im2col_pitch_of(C);
}

void im2col_input(const uint8_t* images_u8, const int* order, const int* order_pos, int images, int C, int H, int W,
                  void* col, int pitch, DType t, cudaStream_t stream, int ahead, const int* order_end) {
  if (pitch != im2col_pitch(C))
    throw std::invalid_argument("im2col_input: pitch " + std::to_string(pitch) + " for " + std::to_string(C) +
                                " channels, expected " + std::to_string(im2col_pitch(C)));
  if (H < 1 || W < 1) throw std::invalid_argument("im2col_input: bad image size");
  if (images <= 0) return;
  const int64_t pixels = int64_t(images) * H * W;
  if (pixels >= (int64_t(1) << 31)) throw std::invalid_argument("im2col_input: too many pixels");
  if (t == DType::bf16)
    dispatch_im2col<bf16>(images_u8, order, order_pos, ahead, order_end, int(pixels), C, H, W, col, stream);
  else
    dispatch_im2col<float>(images_u8, order, order_pos, ahead, order_end, int(pixels), C, H, W, col, stream);
  AE_CUDA_LAUNCH_CHECK();
}

void pack_weights(const float* params, const PackList& list, DType t, cudaStream_t stream) {
  int64_t most = 0, groups = 0;
  for (int i = 0; i < list.count; ++i) {
    most = std::max(most, list.item[i].count());
    groups = std::max(groups, int64_t(list.item[i].K) * list.item[i].C);
  }
  if (most == 0) return;
  if (most >= (int64_t(1) << 31)) throw std::invalid_argument("pack_weights: a packed matrix is too large");
  const dim3 grid(blocks_for(groups), unsigned(list.count));
  if (t == DType::bf16)
    pack_kernel<bf16><<<grid, kThreads, 0, stream>>>(params, list);
  else
    pack_kernel<float><<<grid, kThreads, 0, stream>>>(params, list);
  AE_CUDA_LAUNCH_CHECK();
}

void optimizer_update(const OptimizerConfig& cfg, const OptimizerDeviceState& s, int64_t count, cudaStream_t stream) {
  OptK o{cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, cfg.momentum, cfg.grad_clip};
  const unsigned blocks = blocks_for(count);
  if (cfg.kind == "adam")
    adam_kernel<<<std::min(blocks, kAdamBlocks), kThreads, 0, stream>>>(s, count, o);
  else if (cfg.kind == "sgd")
    sgd_kernel<<<blocks, kThreads, 0, stream>>>(s, count, o);
  else
    throw std::invalid_argument("unknown optimizer '" + cfg.kind + "'");
  AE_CUDA_LAUNCH_CHECK();
}

void grad_sumsq_compute(const float* grad, int64_t count, double* out, cudaStream_t stream) {
  AE_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), stream));
  sumsq_kernel<<<std::min<unsigned>(blocks_for(count), 264), kThreads, 0, stream>>>(grad, count, out);
  AE_CUDA_LAUNCH_CHECK();
}

void codes_to_halves(const float* codes, uint16_t* out, int64_t count, unsigned long long* first_bad,
                     cudaStream_t stream) {
  if (count <= 0) return;
  codes_to_halves_kernel<<<std::min<unsigned>(blocks_for(count), 4096), kThreads, 0, stream>>>(codes, out, count,
                                                                                               first_bad);
  AE_CUDA_LAUNCH_CHECK();
}

void advance_step(int* pos, int64_t* step, int batch, cudaStream_t stream) {
  advance_kernel<<<1, 1, 0, stream>>>(pos, step, batch);
  AE_CUDA_LAUNCH_CHECK();
}

void up2_fold_output_grad(const void* dy, int ldd, int K, int images, int H, int W, void* g, int ldg, DType t,
                          cudaStream_t stream) {
  if (images <= 0) return;
  if (K <= 0 || K > ldd || 9 * K > ldg) throw std::invalid_argument("up2_fold_output_grad: need 9·K ≤ ldg and K ≤ ldd");
  if (H < 1 || W < 1) throw std::invalid_argument("up2_fold_output_grad: bad size");
  const int64_t pixels = int64_t(images) * H * W, n = pixels * ldg;
  if (pixels >= (int64_t(1) << 31)) throw std::invalid_argument("up2_fold_output_grad: too many pixels");
  const unsigned blocks = unsigned((n + kThreads - 1) / kThreads);
  const FastDivmod div_w(W), div_hw(H * W);
  if (t == DType::bf16)
    up2_fold_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(dy), ldd, K, pixels, H, W,
                                                     div_w, div_hw, static_cast<__nv_bfloat16*>(g), ldg);
  else
    up2_fold_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(dy), ldd, K, pixels, H, W, div_w,
                                                     div_hw, static_cast<float*>(g), ldg);
  AE_CUDA_LAUNCH_CHECK();
}

size_t bias_grad_work_floats(int ld) { return size_t(kBiasBlocks) * ld; }

void bias_grad(const void* src, int64_t rows, int ld, int ncols, float* work, float* out, DType t,
               cudaStream_t stream) {
  if (ld < 8 || (ld & (ld - 1)) != 0)
    throw std::invalid_argument("bias_grad: pitch must be a power of two ≥ 8, got " + std::to_string(ld));
  if (ncols > ld) throw std::invalid_argument("bias_grad: more columns than the pitch");
  if (ncols <= 0) return;
  // Enough blocks to keep the memory system busy (two per multiprocessor on an H100), each
  // over a contiguous range of rows.
  const int blocks = int(std::min<int64_t>(kBiasBlocks, std::max<int64_t>(1, rows / 64)));
  const int64_t span = (rows + blocks - 1) / blocks;
  if (t == DType::bf16)
    colsum_partial_kernel<bf16><<<blocks, kThreads, 0, stream>>>(static_cast<const bf16*>(src), rows, ld, span, work);
  else
    colsum_partial_kernel<float><<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(src), rows, ld, span, work);
  AE_CUDA_LAUNCH_CHECK();
  colsum_final_kernel<<<unsigned((ncols + kFinalCols - 1) / kFinalCols), dim3(kFinalCols, kFinalShares), 0, stream>>>(
      work, blocks, ld, ncols, out);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace ae::cuda
