// The weight-gradient GEMM on Hopper's warpgroup MMA (docs/GPU.md, "Warpgroup MMA"), over
// the same split of pixel ranges and into the same workspace as wgrad_igemm.cu's mma.sync
// kernel. Two engines:
//  - bf16, 128×128 tiles: both operands are pixel rows ([pixel][column], the reduction
//    running down the rows), gathered with cp.async, which wgmma reads as MN-major bf16
//    operands straight from shared memory: each stage holds, per operand, two blocks of 64
//    columns × 64 pixel rows in the 128-byte swizzle.
//  - tf32 (the fp32 path): wgmma has no MN-major tf32 form, so the operands come from
//    channel-major copies ([channel][pixel], wgrad_igemm.cu makes them), whose rows are the
//    reduction: the tensor memory accelerator copies each image row of 16 (or 8) pixels as
//    a box of 16 × 128 or 256 channels in the 64-byte (32-byte) swizzle. A box cannot start
//    at an unaligned pixel, so the patch operand's copy comes three times, shifted by the
//    taps' column offsets; the row offsets are the boxes' (zeros above and below the image).
//    For a plain operand × a 3×3 patch, or an output parity × a 2×2 patch (the up2 layers),
//    on grids 16 or 8 pixels wide (channel_major_fits, wgrad_igemm.cu); the others stay on
//    mma.sync.
//
// Compiled for sm_90a alone (the Makefile's WGMMA_ARCH), offered on compute capability 9.0.
#include <cuda.h>  // CUtensorMap and its encoder's types (the driver is reached through the runtime)
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/wgmma_ptx.cuh"
#include "kernels/ae/cuda/wgrad_igemm.cuh"

namespace ae::cuda::igemm {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kTile = 128, kKR = 64;  // a block's rows and columns; pixels per stage
constexpr int kStages = 4;
constexpr int kOperandBytes = kKR * kTile * 2;  // one operand's stage: 16 KB
constexpr int kStageBytes = 2 * kOperandBytes;
constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment to the swizzle's atom

// Two warpgroups split the tile's 128 rows; each runs m64n128k16 over a stage's 64 pixels
// (four k-steps). Stage kt + kStages − 2 is gathered while stage kt's wgmma runs beside
// stage kt − 1's (as conv_wgmma_kernel).
template <bool UNPOOLED_A, bool POW2>
__global__ void __launch_bounds__(256) wgrad_wgmma_kernel(const WgradK p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int NT = 256, CH = 8, CPR = kTile * 2 / 16;  // chunks per pixel row
  constexpr int CHUNKS = kKR * CPR, IT = CHUNKS / NT;
  constexpr int AHEAD = kStages - 2;
  static_assert(NT % CPR == 0 && CHUNKS % NT == 0, "slots");

  extern __shared__ unsigned char smem_raw[];
  const uint32_t sbase = smem_u32(ptx::align_to_swizzle_atom(smem_raw));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
  const int i0 = blockIdx.x * kTile, j0 = blockIdx.y * kTile;
  const int split = int(blockIdx.z) % p.splits, par = p.parity ? int(blockIdx.z) / p.splits : 0;
  const int64_t p_begin = int64_t(split) * p.pix_per_split;
  const int64_t p_end = p_begin + p.pix_per_split < p.P ? p_begin + p.pix_per_split : p.P;
  const int KT = p_end > p_begin ? int((p_end - p_begin + kKR - 1) / kKR) : 0;

  const ChunkCol a_col = chunk_col<bf16>(p.a, p.gw, par, i0 + (tid % CPR) * CH);
  const ChunkCol b_col = chunk_col<bf16>(p.b, p.gw, par, j0 + (tid % CPR) * CH);
  UnpooledChunk a_regs[UNPOOLED_A ? IT : 1];

  auto load_stage = [&](int kt) {  // (unpooled A: B only; fetch_a / store_a do A)
    const uint32_t sA = sbase + (kt % kStages) * kStageBytes;
    const int pb = int(p_begin) + kt * kKR;
    if constexpr (!UNPOOLED_A) load_operand_stage<bf16, POW2, NT, IT, CHUNKS, CPR, 0, kKR>(p.a, a_col, p, par, pb, p_end, sA, tid);
    load_operand_stage<bf16, POW2, NT, IT, CHUNKS, CPR, 0, kKR>(p.b, b_col, p, par, pb, p_end, sA + kOperandBytes, tid);
  };
  auto fetch_a = [&](int kt) {
    fetch_unpooled_stage<bf16, POW2, NT, CHUNKS, CPR>(p.a, a_col, p, int(p_begin) + kt * kKR, p_end, a_regs, tid);
  };
  auto store_a = [&](int kt) {
    store_unpooled_stage<bf16, POW2, NT, CHUNKS, CPR, 0, kKR>(p.a, a_col, p, int(p_begin) + kt * kKR, a_regs,
                                                              sbase + (kt % kStages) * kStageBytes, tid);
  };

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;

#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < KT) {
      load_stage(s);
      if constexpr (UNPOOLED_A) {
        fetch_a(s);
        store_a(s);
      }
    }
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<AHEAD - 1>();
    ptx::fence_proxy_async_smem();  // this thread's cp.async and st.shared of stage kt
    __syncthreads();                // everyone's; stage kt − 2's wgmma done (slot reuse)
    const int nk = kt + AHEAD;
    if (nk < KT) {
      load_stage(nk);
      if constexpr (UNPOOLED_A) fetch_a(nk);
    }
    cp_async_commit();
    const uint32_t stage = sbase + (kt % kStages) * kStageBytes;
    // This warpgroup's 64 rows: A's block wg; all of B's 128 columns (two blocks, kKR rows apart).
    const uint64_t da = ptx::wgmma_desc_sw128_mn(stage + wg * kKR * 128, kKR * 128);
    const uint64_t db = ptx::wgmma_desc_sw128_mn(stage + kOperandBytes, kKR * 128);
    ptx::wgmma_fence_operands(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKR / 16; ++ks) ptx::wgmma_m64n128k16_bf16_mn(acc, da + 128 * ks, db + 128 * ks);
    ptx::wgmma_commit();
    if constexpr (UNPOOLED_A)
      if (nk < KT) store_a(nk);  // its slot held stage kt − 2, free since the barrier
    ptx::wgmma_wait<1>();
    ptx::wgmma_fence_operands(acc);
  }
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operands(acc);
  cp_async_wait<0>();

  // The accumulators in mma.sync's m16n8 layout: warp w of group g holds the 16 rows from
  // 64g + 16(w%4), all 128 columns.
  store_partial(p, reinterpret_cast<const float(&)[1][16][4]>(acc), i0 + wg * 64 + (warp % 4) * 16, j0, lane);
#else
  __trap();  // never launched: wgrad_igemm offers this kernel on compute capability 9.0 only
#endif
}

// ---- tf32 from channel-major operands --------------------------------------------------
constexpr int kTmaPixels = 32;  // pixels per stage (2 image rows of 16 or 4 of 8): four k-steps
constexpr int kTmaBn = 128;     // B columns per tile (channels of one tap)
template <int BM>
constexpr int tma_stage_bytes() { return kTmaPixels * (BM + kTmaBn) * 4; }
template <int BM, int STAGES>
constexpr int tma_smem_bytes() { return STAGES * tma_stage_bytes<BM>() + STAGES * 8 + 1024; }  // + barriers, alignment

// A K-major block of rows of GW pixels (GW · 4 bytes: the swizzle of that width).
template <int GW>
__device__ __forceinline__ uint64_t row_block_desc(uint32_t smem_addr) {
  if constexpr (GW == 16) return ptx::wgmma_desc_sw64(smem_addr);
  else return ptx::wgmma_desc_sw32(smem_addr);
}

// BM/64 warpgroups each own 64 rows of A (channels of the plain operand) × the tile's 128
// columns of B (channels c0… of one tap), over one split of the pixels of one output parity
// (blockIdx.z: parity · splits + split, as the mma.sync kernel). A stage is one box per image
// row and operand: GW pixels × BM or 128 channels. Thread 0 also issues the copies: stage kt +
// STAGES − 2 is requested once every warpgroup has waited for stage kt − 2's wgmma (the
// barrier at the top of the loop), so the copies run two stages ahead of the math. Tiles of
// 256 rows wherever A has them: with 128 the seed's conv2 was 14–22 % slower (more bytes from
// the L2 per FLOP; docs/BENCHMARKS.md), as were clusters of three blocks sharing A's copies.
template <int BM, int STAGES, int GW>
__global__ void __launch_bounds__(BM * 2) wgrad_wgmma_tf32_kernel(const __grid_constant__ CUtensorMap map_a,
                                                                 const __grid_constant__ CUtensorMap map_b,
                                                                 const WgradK p, const WgradTaps taps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int ROWS = kTmaPixels / GW, RB = GW * 4;  // image rows per stage, bytes per row of a channel
  constexpr int A_ROW = BM * RB, B_ROW = kTmaBn * RB, STAGE = tma_stage_bytes<BM>();
  constexpr int AHEAD = STAGES - 2;
  static_assert(STAGES >= 3 && (BM == 128 || BM == 256) && (GW == 8 || GW == 16), "tile");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t sbase = smem_u32(ptx::align_to_swizzle_atom(smem_raw));
  const uint32_t bars = sbase + STAGES * STAGE;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
  const int i0 = blockIdx.x * BM, j0 = blockIdx.y * kTmaBn;
  const int split = int(blockIdx.z) % p.splits, par = p.parity ? int(blockIdx.z) / p.splits : 0;
  const int64_t p_begin = int64_t(split) * p.pix_per_split;
  const int64_t p_end = p_begin + p.pix_per_split < p.P ? p_begin + p.pix_per_split : p.P;
  const int KT = p_end > p_begin ? int((p_end - p_begin + kTmaPixels - 1) / kTmaPixels) : 0;
  // The tile's tap (as chunk_col decodes a patch column), its offset (dy, dx) and its first
  // channel in the copy shifted by dx; A's rows in the copy of this parity.
  const int tap = j0 / taps.b_cs, c0 = j0 - tap * taps.b_cs;
  int dy, dx;
  if (taps.b_kind == PixelMatrix::patch2_parity) {
    dy = (tap >> 1) + (par >> 1) - 1;
    dx = (tap & 1) + (par & 1) - 1;
  } else {
    int ky = tap / 3, kx = tap % 3;
    if (taps.b_kind == PixelMatrix::patch3_flipped) {
      ky = 2 - ky;
      kx = 2 - kx;
    }
    dy = ky - 1;
    dx = kx - 1;
  }
  const int b_row0 = (dx + 1) * taps.b_cs + c0, a_row0 = par * taps.a_cs + i0;  // copy s holds x + s − 1

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) ptx::mbarrier_init(bars + 8 * s, 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  auto issue = [&](int kt) {  // thread 0: stage kt's boxes
    const int slot = kt % STAGES;
    const uint32_t stage = sbase + slot * STAGE, bar = bars + 8 * slot;
    ptx::mbarrier_arrive_expect_tx(bar, STAGE);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      // Image rows never straddle a split (splits are multiples of 64 pixels); a row past
      // this split's end is asked at image `images`, outside the tensor: zeros.
      const int64_t row = (p_begin + int64_t(kt) * kTmaPixels) / GW + r;
      int n = taps.images, y = 0;
      if (row * GW < p_end) {
        n = int(row / p.gh);
        y = int(row - int64_t(n) * p.gh);
      }
      ptx::tma_load_4d(stage + r * A_ROW, &map_a, bar, 0, y, n, a_row0);
      ptx::tma_load_4d(stage + ROWS * A_ROW + r * B_ROW, &map_b, bar, 0, y + dy, n, b_row0);
    }
  };

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;
  if (tid == 0)
    for (int s = 0; s < AHEAD && s < KT; ++s) issue(s);
  for (int kt = 0; kt < KT; ++kt) {
    __syncthreads();  // every warpgroup has waited for stage kt − 2's wgmma: its slot may be refilled
    if (tid == 0 && kt + AHEAD < KT) issue(kt + AHEAD);
    ptx::mbarrier_wait(bars + 8 * (kt % STAGES), uint32_t(kt / STAGES) & 1u);
    const uint32_t stage = sbase + (kt % STAGES) * STAGE;
    ptx::wgmma_fence_operands(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const uint64_t da = row_block_desc<GW>(stage + r * A_ROW + wg * 64 * RB);
      const uint64_t db = row_block_desc<GW>(stage + ROWS * A_ROW + r * B_ROW);
#pragma unroll
      for (int ks = 0; ks < GW / 8; ++ks) ptx::wgmma_m64n128k8_tf32(acc, da + 2 * ks, db + 2 * ks);  // 8 pixels, 32 bytes
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<1>();
    ptx::wgmma_fence_operands(acc);
  }
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operands(acc);
  store_partial(p, reinterpret_cast<const float(&)[1][16][4]>(acc), i0 + wg * 64 + (warp % 4) * 16, j0, lane);
#else
  __trap();  // never launched: plan_wgrad picks this engine on compute capability 9.0 only
#endif
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled, asked of the driver once (the tools link the runtime, not libcuda).
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    AE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    if (!f || found != cudaDriverEntryPointSuccess)
      throw std::runtime_error("the CUDA driver offers no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A channel-major operand [channels][images][gh][gw] (fp32) as a 4-D tensor, boxes of one
// image row × box_rows channels in the swizzle of the row's width (64 or 32 bytes).
CUtensorMap channel_major_map(const float* base, int gw, int gh, int images, int channels, int box_rows) {
  CUtensorMap m{};
  const cuuint64_t row = cuuint64_t(gw) * 4;
  const cuuint64_t dims[4] = {cuuint64_t(gw), cuuint64_t(gh), cuuint64_t(images), cuuint64_t(channels)};
  const cuuint64_t strides[3] = {row, row * gh, row * gh * images};
  const cuuint32_t box[4] = {cuuint32_t(gw), 1, 1, cuuint32_t(box_rows)};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  const CUresult r = encode_tiled()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<float*>(base), dims, strides,
                                    box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    gw == 16 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("wgrad_igemm: cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ") for " +
                             std::to_string(channels) + " channels of " + std::to_string(images) + "×" +
                             std::to_string(gh) + "×" + std::to_string(gw));
  return m;
}

template <int BM, int STAGES, int GW>
void launch_tf32(const WgradK& k, const WgradTaps& taps, const float* a_cm, const float* b_cm, cudaStream_t stream) {
  const int parities = k.parity ? 4 : 1;
  const CUtensorMap ma = channel_major_map(a_cm, GW, k.gh, taps.images, parities * taps.a_cs, BM);
  const CUtensorMap mb = channel_major_map(b_cm, GW, k.gh, taps.images, 3 * taps.b_cs, kTmaBn);
  dim3 grid(k.Mp / BM, k.Np / kTmaBn, k.splits * parities);
  allow_dynamic_smem(wgrad_wgmma_tf32_kernel<BM, STAGES, GW>, tma_smem_bytes<BM, STAGES>());
  wgrad_wgmma_tf32_kernel<BM, STAGES, GW><<<grid, BM * 2, tma_smem_bytes<BM, STAGES>(), stream>>>(ma, mb, k, taps);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_wgrad_wgmma_tf32(const WgradK& k, const WgradTaps& taps, const float* a_cm, const float* b_cm, int bm,
                             cudaStream_t stream) {
  const int taps_n = taps.b_kind == PixelMatrix::patch2_parity ? 4 : 9;
  if ((k.gw != 8 && k.gw != 16) || taps.a_cs % bm != 0 || taps.b_cs % kTmaBn != 0 || k.Np != taps_n * taps.b_cs ||
      k.Mp != taps.a_cs)
    throw std::invalid_argument("wgrad_igemm: the channel-major tf32 engine needs a grid 8 or 16 wide and pitches of 128");
  if (k.gw == 16)
    bm == 256 ? launch_tf32<256, 4, 16>(k, taps, a_cm, b_cm, stream) : launch_tf32<128, 6, 16>(k, taps, a_cm, b_cm, stream);
  else
    bm == 256 ? launch_tf32<256, 4, 8>(k, taps, a_cm, b_cm, stream) : launch_tf32<128, 6, 8>(k, taps, a_cm, b_cm, stream);
}

template <bool UNPOOLED_A>
void launch_wgrad_wgmma(const WgradK& k, int splits, cudaStream_t stream) {
  dim3 grid(k.Mp / kTile, k.Np / kTile, splits * (k.parity ? 4 : 1));
  if (k.div_gw.log2 >= 0 && k.div_ghw.log2 >= 0) {
    allow_dynamic_smem(wgrad_wgmma_kernel<UNPOOLED_A, true>, kSmemBytes);
    wgrad_wgmma_kernel<UNPOOLED_A, true><<<grid, 256, kSmemBytes, stream>>>(k);
  } else {
    allow_dynamic_smem(wgrad_wgmma_kernel<UNPOOLED_A, false>, kSmemBytes);
    wgrad_wgmma_kernel<UNPOOLED_A, false><<<grid, 256, kSmemBytes, stream>>>(k);
  }
  AE_CUDA_LAUNCH_CHECK();
}
template void launch_wgrad_wgmma<false>(const WgradK&, int, cudaStream_t);
template void launch_wgrad_wgmma<true>(const WgradK&, int, cudaStream_t);

int wgrad_wgmma_blocks_per_sm() {
  allow_dynamic_smem(wgrad_wgmma_kernel<false, false>, kSmemBytes);
  int n = 0;
  AE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgrad_wgmma_kernel<false, false>, 256, kSmemBytes));
  return std::max(n, 1);
}

}  // namespace ae::cuda::igemm
