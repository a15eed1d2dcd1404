// Implicit-GEMM weight gradients (wgrad_igemm, ops.cuh; docs/GPU.md): a GEMM over
// pixels of two pixel-matrix operands gathered from NHWC tensors (plain, 3×3 / 2×2 patches,
// parity-subsampled, unpooled on the fly), split over pixel ranges into a workspace that
// wgrad_reduce() scatters into the PyTorch-layout gradient. This file: the mma.sync kernel,
// the dispatch (bf16 tiles of 128 columns go to wgrad_wgmma.cu on Hopper) and the
// reduction; the gathers both kernels use are wgrad_igemm.cuh.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/wgrad_igemm.cuh"

namespace ae::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace ptx;
using namespace igemm;

// POW2: the reduction grid's height and width are powers of two (every grid of the seed
// model), so pixels decode with shifts; the general decode cost the seed model's weight
// gradients measurably (docs/BENCHMARKS.md, "Hopper's warpgroup MMA").
template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool UNPOOLED_A, bool POW2>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32) wgrad_igemm_kernel(const WgradK p) {
  using G = WgradGeom<T, BM, BN>;
  constexpr int NT = WARPS_M * WARPS_N * 32;
  constexpr int KR = G::KR, CH = 16 / int(sizeof(T));
  constexpr int A_CPR = BM * int(sizeof(T)) / 16, B_CPR = BN * int(sizeof(T)) / 16;
  constexpr int A_CHUNKS = KR * A_CPR, B_CHUNKS = KR * B_CPR;
  constexpr int A_IT = (A_CHUNKS + NT - 1) / NT, B_IT = (B_CHUNKS + NT - 1) / NT;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile");

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int i0 = blockIdx.x * BM, j0 = blockIdx.y * BN;
  const int split = int(blockIdx.z) % p.splits, par = p.parity ? int(blockIdx.z) / p.splits : 0;
  const int64_t p_begin = int64_t(split) * p.pix_per_split;
  const int64_t p_end = p_begin + p.pix_per_split < p.P ? p_begin + p.pix_per_split : p.P;
  const int KT = p_end > p_begin ? int((p_end - p_begin + KR - 1) / KR) : 0;

  // NT is a multiple of the chunks per row, so all of a thread's slots share one column.
  static_assert(NT % A_CPR == 0 && NT % B_CPR == 0, "slot columns");
  const ChunkCol a_col = chunk_col<T>(p.a, p.gw, par, i0 + (tid % A_CPR) * CH);
  const ChunkCol b_col = chunk_col<T>(p.b, p.gw, par, j0 + (tid % B_CPR) * CH);

  auto load_stage = [&](int kt, int slot) {
    const uint32_t sA = sbase + slot * G::STAGE, sB = sA + KR * G::A_PITCH;
    const int pb = int(p_begin) + kt * KR;
    if constexpr (!UNPOOLED_A)  // else fetch_a / store_a
      load_operand_stage<T, POW2, NT, A_IT, A_CHUNKS, A_CPR, G::A_PITCH>(p.a, a_col, p, par, pb, p_end, sA, tid);
    load_operand_stage<T, POW2, NT, B_IT, B_CHUNKS, B_CPR, G::B_PITCH>(p.b, b_col, p, par, pb, p_end, sB, tid);
  };

  // Operand A unpooled: registers between a stage's fetch and its store to shared memory.
  UnpooledChunk a_regs[UNPOOLED_A ? A_IT : 1];
  auto fetch_a = [&](int kt) {
    fetch_unpooled_stage<T, POW2, NT, A_CHUNKS, A_CPR>(p.a, a_col, p, int(p_begin) + kt * KR, p_end, a_regs, tid);
  };
  auto store_a = [&](int kt, int slot) {
    store_unpooled_stage<T, POW2, NT, A_CHUNKS, A_CPR, G::A_PITCH>(p.a, a_col, p, int(p_begin) + kt * KR, a_regs,
                                                                   sbase + slot * G::STAGE, tid);
  };

  float acc[MI][NI][4];
  zero_acc(acc);

  auto compute_stage = [&](int slot) {
    const uint32_t sA = sbase + slot * G::STAGE, sB = sA + KR * G::A_PITCH;
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int ks = 0; ks < KR / Mma<T>::kStep; ++ks) {
      uint32_t af[MI][4], bfr[NI][2];
      if constexpr (sizeof(T) == 2) {
        // Shared tiles are [pixel][column]; ldmatrix.trans hands out the fragments of the
        // transposed (column-major in k) operands that mma expects.
        const int q = lane >> 3, r = lane & 7;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int krow = ks * 16 + r + ((q >> 1) << 3);
          const int mcol = wm * WM + mi * 16 + ((q & 1) << 3);
          ldmatrix_x4_trans(af[mi], sA + krow * G::A_PITCH + mcol * 2);
        }
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
          const int krow = ks * 16 + r + ((q & 1) << 3);
          const int ncol = wn * WN + nj * 16 + ((q >> 1) << 3);
          uint32_t rr[4];
          ldmatrix_x4_trans(rr, sB + krow * G::B_PITCH + ncol * 2);
          bfr[2 * nj][0] = rr[0];
          bfr[2 * nj][1] = rr[1];
          bfr[2 * nj + 1][0] = rr[2];
          bfr[2 * nj + 1][1] = rr[3];
        }
      } else {
        // tf32: 32-bit elements, read the fragments one word at a time (row pitches are
        // 8 words mod 32 banks, so a warp's loads are conflict-free).
        const uint32_t* A = reinterpret_cast<const uint32_t*>(smem + slot * G::STAGE);
        const uint32_t* B = A + KR * G::A_PITCH / 4;
        constexpr int AP = G::A_PITCH / 4, BP = G::B_PITCH / 4;
        const int kb = ks * 8;
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int mr = wm * WM + mi * 16 + g;
          af[mi][0] = Mma<float>::fix_ret(A[(kb + t4) * AP + mr]);
          af[mi][1] = Mma<float>::fix_ret(A[(kb + t4) * AP + mr + 8]);
          af[mi][2] = Mma<float>::fix_ret(A[(kb + t4 + 4) * AP + mr]);
          af[mi][3] = Mma<float>::fix_ret(A[(kb + t4 + 4) * AP + mr + 8]);
        }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int nc = wn * WN + ni * 8 + g;
          bfr[ni][0] = Mma<float>::fix_ret(B[(kb + t4) * BP + nc]);
          bfr[ni][1] = Mma<float>::fix_ret(B[(kb + t4 + 4) * BP + nc]);
        }
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) Mma<T>::mma(acc[mi][ni], af[mi], bfr[ni]);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) {
      load_stage(s, s);
      if constexpr (UNPOOLED_A) {
        fetch_a(s);
        store_a(s, s);
      }
    }
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const int nk = kt + STAGES - 1;
    if (nk < KT) {
      load_stage(nk, nk % STAGES);
      if constexpr (UNPOOLED_A) fetch_a(nk);
    }
    cp_async_commit();
    compute_stage(kt % STAGES);
    // slot nk % STAGES was last read by compute_stage(kt − 1), before this iteration's barrier
    if constexpr (UNPOOLED_A)
      if (nk < KT) store_a(nk, nk % STAGES);
  }
  cp_async_wait<0>();

  store_partial(p, acc, i0 + wm * WM, j0 + wn * WN, lane);
}

template <typename T, int BM, int BN, int WM_, int WN_, int ST, bool UA = false>
void launch_wgrad(const WgradK& k, int splits, cudaStream_t stream) {
  constexpr int smem = ST * WgradGeom<T, BM, BN>::STAGE;
  dim3 grid(k.Mp / BM, k.Np / BN, splits * (k.parity ? 4 : 1));
  if (k.div_gw.log2 >= 0 && k.div_ghw.log2 >= 0) {
    allow_dynamic_smem(wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, UA, true>, smem);
    wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, UA, true><<<grid, WM_ * WN_ * 32, smem, stream>>>(k);
  } else {
    allow_dynamic_smem(wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, UA, false>, smem);
    wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, UA, false><<<grid, WM_ * WN_ * 32, smem, stream>>>(k);
  }
  AE_CUDA_LAUNCH_CHECK();
}

// bf16 tiles of 128 columns take the warpgroup MMA where the GPU has it (wgrad_wgmma.cu);
// tf32 has no form of it for pixel-row operands.
template <typename T>
bool uses_wgmma(int bn) {
  return sizeof(T) == 2 && bn == 128 && has_wgmma();
}

template <typename T>
void dispatch_wgrad(const WgradK& k, const WgradPlan& plan, cudaStream_t stream) {
  if (uses_wgmma<T>(plan.bn)) {
    if (k.a.kind == PixelMatrix::unpooled)
      launch_wgrad_wgmma<true>(k, plan.splits, stream);
    else
      launch_wgrad_wgmma<false>(k, plan.splits, stream);
    return;
  }
  if (k.a.kind == PixelMatrix::unpooled) {  // the default tile of each width only
    if (plan.bn == 128)
      launch_wgrad<T, 128, 128, 2, 4, 3, true>(k, plan.splits, stream);
    else if (plan.bn == 32)
      launch_wgrad<T, 128, 32, 4, 1, 3, true>(k, plan.splits, stream);
    else
      launch_wgrad<T, 128, 16, 4, 1, 3, true>(k, plan.splits, stream);
    return;
  }
  if (plan.bn == 128)  // 8 warps of 64×32, 3 stages (the other tiles: docs/BENCHMARKS.md)
    launch_wgrad<T, 128, 128, 2, 4, 3>(k, plan.splits, stream);
  else if (plan.bn == 32)
    launch_wgrad<T, 128, 32, 4, 1, 3>(k, plan.splits, stream);
  else
    launch_wgrad<T, 128, 16, 4, 1, 3>(k, plan.splits, stream);
}

// NHWC rows [P][Cs] → channel-major [Cs][P] (fp32) through a 32×32 tile in shared memory:
// each warp reads 32 channels of a pixel and writes 32 pixels of a channel, both as 128-byte
// lines. The copies the tf32 warpgroup-MMA weight gradient reads (channel_major_fits).
// SHIFTED (a patch operand on a grid 16 pixels wide): three copies, [3][Cs][P], copy s holding
// each pixel's neighbour at x + s − 1 (zero past the row's ends) — the tensor memory
// accelerator's boxes cannot start at a pixel that is not 16-byte aligned, so the 3×3 taps'
// column offsets are made here and only the row offsets are left to the boxes. A tile's 32
// pixels are two whole image rows, so every neighbour is in the tile.
constexpr int kTransposeTile = 32, kTransposeRows = 8;
template <bool SHIFTED>
__global__ void __launch_bounds__(kTransposeTile* kTransposeRows)
    channel_major_kernel(const float* __restrict__ src, int64_t P, int Cs, float* __restrict__ dst) {
  __shared__ float tile[kTransposeTile][kTransposeTile + 1];
  const int64_t p0 = int64_t(blockIdx.x) * kTransposeTile;
  const int c0 = int(blockIdx.y) * kTransposeTile, tx = int(threadIdx.x);
  for (int i = int(threadIdx.y); i < kTransposeTile; i += kTransposeRows) {
    const int64_t pix = p0 + i;
    tile[i][tx] = pix < P ? src[pix * Cs + c0 + tx] : 0.f;
  }
  __syncthreads();
  const int64_t pix = p0 + tx;
  if (pix >= P) return;
  for (int i = int(threadIdx.y); i < kTransposeTile; i += kTransposeRows) {
    const int64_t c = c0 + i;
    if constexpr (SHIFTED) {
      const int x = tx & 15;
      dst[c * P + pix] = x > 0 ? tile[tx - 1][i] : 0.f;
      dst[(Cs + c) * P + pix] = tile[tx][i];
      dst[(2 * Cs + c) * P + pix] = x < 15 ? tile[tx + 1][i] : 0.f;
    } else {
      dst[c * P + pix] = tile[tx][i];
    }
  }
}

void to_channel_major(const float* src, int64_t P, int Cs, bool shifted, float* dst, cudaStream_t stream) {
  const dim3 grid(unsigned((P + kTransposeTile - 1) / kTransposeTile), unsigned(Cs / kTransposeTile));
  if (shifted)
    channel_major_kernel<true><<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream>>>(src, P, Cs, dst);
  else
    channel_major_kernel<false><<<grid, dim3(kTransposeTile, kTransposeRows), 0, stream>>>(src, P, Cs, dst);
  AE_CUDA_LAUNCH_CHECK();
}

// Threads (x, y) of a block: x picks a weight (k, c, tap) (+ K for an im2col bias column),
// y a share of the splits (z = y, y + blockDim.y, …); a weight's shares are summed in shared
// memory. Splitting the splits keeps this kernel short when they are many (the first
// encoder layer: ~200 splits of its 262,144 pixels, fewer than 8,000 weights).
constexpr int kReduceThreads = 256;
__global__ void __launch_bounds__(kReduceThreads) wgrad_reduce_kernel(const float* __restrict__ part, int splits,
                                                                      int parities, int Mp, int Np, WgradScatter s) {
  __shared__ float shares[kReduceThreads];
  const int64_t nw = int64_t(s.K) * s.C * 9;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int z0 = int(threadIdx.y), dz = int(blockDim.y);
  const size_t slice = size_t(Mp) * Np;
  float sum = 0.f;
  float* dst = nullptr;
  if (idx >= nw) {
    const int k = int(idx - nw);
    if (s.bias_column >= 0 && k < s.K) {
      for (int z = z0; z < splits; z += dz) sum += part[z * slice + size_t(k) * Np + s.bias_column];
      dst = s.bias_grad + k;
    }
  } else {
    // Consecutive threads take consecutive workspace columns j (c fastest, or k for the
    // flipped patch), so a warp's loads of each split are coalesced; the [K][C][9] stores
    // (one per weight, against one load per split) are the strided ones. (With t fastest,
    // the conv2 gradient's reduction read each 4 bytes from its own sector, a large share of
    // the stage: Nsight Compute; docs/BENCHMARKS.md, "Hopper's warpgroup MMA".)
    int k, c, t;
    if (s.mode == WgradScatter::in_by_flipped_patch) {
      k = int(idx % s.K);
      t = int((idx / s.K) % 9);
      c = int(idx / (9 * int64_t(s.K)));
    } else {
      c = int(idx % s.C);
      t = int((idx / s.C) % 9);
      k = int(idx / (9 * int64_t(s.C)));
    }
    dst = s.weight_grad + (int64_t(k) * s.C + c) * 9 + t;
    switch (s.mode) {
      case WgradScatter::out_by_patch: {
        const int j = s.im2col ? t * s.C + c : t * s.Cs + c;
        for (int z = z0; z < splits; z += dz) sum += part[z * slice + size_t(k) * Np + j];
        break;
      }
      case WgradScatter::in_by_flipped_patch: {
        const int j = t * s.Cs + k;
        for (int z = z0; z < splits; z += dz) sum += part[z * slice + size_t(c) * Np + j];
        break;
      }
      case WgradScatter::out_by_parity_patch: {
        const int ky = t / 3, kx = t % 3;
        for (int q = 0; q < parities; ++q) {
          const int dy = q >> 1, dx = q & 1;
          const int a = (ky + 1 - dy) >> 1, b = (kx + 1 - dx) >> 1;  // the 2×2 tap that 3×3 tap (ky,kx) folds into
          const size_t j = size_t(a * 2 + b) * s.Cs + c;
          for (int z = z0; z < splits; z += dz) sum += part[(size_t(q) * splits + z) * slice + size_t(k) * Np + j];
        }
        break;
      }
    }
  }
  if (dz == 1) {
    if (dst) *dst = sum;
    return;
  }
  shares[threadIdx.y * blockDim.x + threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && dst) {
    for (int y = 1; y < dz; ++y) sum += shares[y * blockDim.x + threadIdx.x];
    *dst = sum;
  }
}

// Blocks of the weight-gradient kernel that one multiprocessor holds at once.
template <typename T, int BM, int BN, int WM_, int WN_, int ST>
int wgrad_occupancy() {
  constexpr int smem = ST * WgradGeom<T, BM, BN>::STAGE;
  allow_dynamic_smem(wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, false, false>, smem);
  int n = 0;
  AE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, false, false>,
                                                              WM_ * WN_ * 32, smem));
  return std::max(n, 1);
}
template <typename T>
int wgrad_blocks_per_sm(int bn) {
  if (uses_wgmma<T>(bn)) return wgrad_wgmma_blocks_per_sm();
  if (bn == 128) return wgrad_occupancy<T, 128, 128, 2, 4, 3>();
  return bn == 32 ? wgrad_occupancy<T, 128, 32, 4, 1, 3>() : wgrad_occupancy<T, 128, 16, 4, 1, 3>();
}
// Whether the fp32 GEMM of a, b runs on the tf32 warpgroup MMA from channel-major copies
// (WgradPlan): what wgrad_wgmma.cu's boxes can hold — one image row of 16 pixels, 128-channel
// blocks — and a GPU with wgmma. On an H200, the seed model's encoder conv2 at fp32 batch 64:
// docs/BENCHMARKS.md.
bool channel_major_fits(const PixelMatrix& a, const PixelMatrix& b, int grid_w, int parities, DType t) {
  return t == DType::f32 && parities == 1 && grid_w == 16 && a.kind == PixelMatrix::plain && !a.parity_subsample &&
         (b.kind == PixelMatrix::patch3 || b.kind == PixelMatrix::patch3_flipped) && a.Cs % 128 == 0 &&
         b.Cs % 128 == 0 && has_wgmma();
}

}  // namespace

WgradPlan plan_wgrad(const PixelMatrix& a, const PixelMatrix& b, int images, int grid_h, int grid_w, int parities,
                     DType t, int max_splits) {
  const int M = a.width(), N = b.width();
  WgradPlan p;
  p.channel_major = channel_major_fits(a, b, grid_w, parities, t);
  p.a_cs = a.Cs;
  p.b_cs = b.Cs;
  p.bm = p.channel_major && a.Cs % 256 == 0 ? 256 : 128;
  p.bn = N > 32 ? 128 : N > 16 ? 32 : 16;
  p.Mp = (M + p.bm - 1) / p.bm * p.bm;
  p.Np = (N + p.bn - 1) / p.bn * p.bn;
  p.parities = parities;
  p.grid_h = grid_h;
  p.grid_w = grid_w;
  p.pixels = int64_t(images) * grid_h * grid_w;
  const int tiles = (p.Mp / p.bm) * (p.Np / p.bn) * parities;
  const int64_t kr = 64;  // a multiple of both element types' pixels per stage
  // The pixels of one of the kernel's stages: 128 bytes of each operand row (fp32 32, bf16
  // 64) in wgrad_igemm_kernel, 64 in the channel-major tf32 kernel (wgrad_wgmma.cu).
  const int64_t stage_pixels = p.channel_major ? 64 : 128 / int64_t(dtype_bytes(t));
  // As many splits as fill the GPU's block slots in one wave (a partial second wave would
  // leave most multiprocessors idle), each with at least 8 of the kernel's stages. (Eight
  // stages of 64 pixels for fp32 too, i.e. sixteen of its stages, left the fp32 weight
  // gradients of the output and 8×8 layers on 64–72 blocks, slower than 8 of its stages; 4
  // were slower in bf16: docs/BENCHMARKS.md, "The output layer's halo loads worked out once,
  // the fp32 weight gradients' splits".)
  const int64_t slots = int64_t(sm_count()) * (p.channel_major      ? 1  // its shared memory: one block per multiprocessor
                                                : t == DType::bf16 ? wgrad_blocks_per_sm<bf16>(p.bn)
                                                                   : wgrad_blocks_per_sm<float>(p.bn));
  const int64_t want = std::max<int64_t>(1, slots / tiles);
  const int64_t most = std::max<int64_t>(1, p.pixels / (8 * stage_pixels));
  // max_splits: 64, an earlier cap, left the first encoder layer's 2 tiles on 128 blocks,
  // under one per multiprocessor; 256 is the default.
  if (max_splits < 1) throw std::invalid_argument("plan_wgrad: max_splits must be ≥ 1");
  int64_t splits = std::min<int64_t>({want, most, int64_t(max_splits)});
  int64_t per = (p.pixels + splits - 1) / splits;
  per = (per + kr - 1) / kr * kr;
  splits = (p.pixels + per - 1) / per;
  p.splits = int(std::max<int64_t>(1, splits));
  p.pix_per_split = int(per);
  return p;
}

void wgrad_igemm(const PixelMatrix& a, const PixelMatrix& b, const WgradPlan& plan, float* workspace, DType t,
                 cudaStream_t stream) {
  if (plan.pixels <= 0) return;
  if (a.Cs < 8 || b.Cs < 8) throw std::invalid_argument("wgrad_igemm: channel pitch must be ≥ 8");
  if (plan.parities != 1 && plan.parities != 4) throw std::invalid_argument("wgrad_igemm: parities must be 1 or 4");
  auto op = [](const PixelMatrix& m) {
    PixOpK o{};
    o.src = m.src;
    o.Hs = m.Hs;
    o.Ws = m.Ws;
    o.lcs = ilog2_exact(m.Cs, "wgrad_igemm: channel pitch");
    o.kind = m.kind;
    o.sub = m.parity_subsample ? 1 : 0;
    o.argmax = m.argmax;
    return o;
  };
  if (plan.grid_h < 1 || plan.grid_w < 1) throw std::invalid_argument("wgrad_igemm: empty reduction grid");
  for (const PixelMatrix* m : {&a, &b}) {
    // The source's size follows from the grid: the kernel reads it through the grid's pixel
    // index alone, so any other size would be read wrongly rather than fail.
    const bool sub = m->parity_subsample;
    if (sub && (m->kind != PixelMatrix::plain || plan.parities != 4))
      throw std::invalid_argument("wgrad_igemm: parity subsampling is for a plain operand with 4 parities");
    const bool fits = m->kind == PixelMatrix::unpooled ? 2 * m->Hs == plan.grid_h && 2 * m->Ws == plan.grid_w
                      : sub ? m->Hs == 2 * plan.grid_h && m->Ws == 2 * plan.grid_w
                            : m->Hs == plan.grid_h && m->Ws == plan.grid_w;
    if (!fits)
      throw std::invalid_argument("wgrad_igemm: an operand of " + std::to_string(m->Hs) + "×" + std::to_string(m->Ws) +
                                  " does not fit the reduction grid " + std::to_string(plan.grid_h) + "×" +
                                  std::to_string(plan.grid_w));
  }
  if (b.kind == PixelMatrix::unpooled) throw std::invalid_argument("wgrad_igemm: only operand A can be unpooled");
  if (a.kind == PixelMatrix::unpooled &&
      (!a.argmax || plan.parities != 1 || 2 * a.Hs != plan.grid_h || 2 * a.Ws != plan.grid_w))
    throw std::invalid_argument("wgrad_igemm: an unpooled operand needs its argmax and a grid twice its size");
  if (plan.pixels > (int64_t(1) << 30)) throw std::invalid_argument("wgrad_igemm: too many pixels");
  WgradK k{};
  k.a = op(a);
  k.b = op(b);
  k.gh = plan.grid_h;
  k.gw = plan.grid_w;
  k.div_gw = FastDivmod(plan.grid_w);
  k.div_ghw = FastDivmod(plan.grid_h * plan.grid_w);
  k.P = plan.pixels;
  k.pix_per_split = plan.pix_per_split;
  k.splits = plan.splits;
  k.parity = plan.parities == 4 ? 1 : 0;
  k.partial = workspace;
  k.Mp = plan.Mp;
  k.Np = plan.Np;
  if (plan.channel_major) {
    if (!channel_major_fits(a, b, plan.grid_w, plan.parities, t) || a.Cs != plan.a_cs || b.Cs != plan.b_cs)
      throw std::invalid_argument("wgrad_igemm: the plan's channel-major engine does not fit these operands");
    float* a_cm = workspace + plan.partial_floats();
    float* b_cm = a_cm + size_t(a.Cs) * size_t(plan.pixels);
    to_channel_major(static_cast<const float*>(a.src), plan.pixels, a.Cs, false, a_cm, stream);
    to_channel_major(static_cast<const float*>(b.src), plan.pixels, b.Cs, true, b_cm, stream);
    WgradTaps taps;
    taps.images = int(plan.pixels / (int64_t(plan.grid_h) * plan.grid_w));
    taps.a_cs = a.Cs;
    taps.b_cs = b.Cs;
    taps.flipped = b.kind == PixelMatrix::patch3_flipped;
    launch_wgrad_wgmma_tf32(k, taps, a_cm, b_cm, plan.bm, stream);
    return;
  }
  if (t == DType::bf16)
    dispatch_wgrad<bf16>(k, plan, stream);
  else
    dispatch_wgrad<float>(k, plan, stream);
}

void wgrad_reduce(const float* workspace, const WgradPlan& plan, const WgradScatter& s, cudaStream_t stream) {
  const int64_t n = int64_t(s.K) * s.C * 9 + (s.bias_column >= 0 ? s.K : 0);
  int shares = 1;  // at most 8 threads per weight, each summing at least 8 splits
  while (shares < 8 && shares * 16 <= plan.splits) shares *= 2;
  const int per_block = kReduceThreads / shares;
  wgrad_reduce_kernel<<<unsigned((n + per_block - 1) / per_block), dim3(per_block, shares), 0, stream>>>(
      workspace, plan.splits, plan.parities, plan.Mp, plan.Np, s);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace ae::cuda
