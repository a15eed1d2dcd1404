// The weight-gradient GEMM on Hopper's warpgroup MMA (docs/GPU.md, "Warpgroup MMA"), over
// the same split of pixel ranges and into the same workspace as wgrad_igemm.cu's mma.sync
// kernel. Two engines:
//  - bf16, 128×128 tiles: both operands are pixel rows ([pixel][column], the reduction
//    running down the rows), gathered with cp.async, which wgmma reads as MN-major bf16
//    operands straight from shared memory: each stage holds, per operand, two blocks of 64
//    columns × 64 pixel rows in the 128-byte swizzle.
//  - tf32 (the fp32 path): wgmma has no MN-major tf32 form, so the operands come from
//    channel-major copies ([channel][pixel], wgrad_igemm.cu makes them), whose rows are the
//    reduction: the tensor memory accelerator copies each image row of 16 pixels as a box
//    of 16 × 128 or 256 channels in the 64-byte swizzle. A box cannot start at an unaligned
//    pixel, so the patch operand's copy comes three times, shifted by the taps' column
//    offsets; the row offsets are the boxes' (zeros above and below the image). For a plain
//    operand × a 3×3 patch on a grid 16 pixels wide (the seed model's encoder conv2); the
//    others stay on mma.sync.
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
constexpr int kTmaRows = 2;                     // image rows of 16 pixels per stage: 32 pixels, 4 k-steps
constexpr int kTmaRowBytes = 16 * 4;            // a channel's 16 fp32 pixels: one 64-byte swizzle row
constexpr int kTmaBn = 128;                     // B columns per tile (channels of one tap)
template <int BM>
constexpr int tma_stage_bytes() { return kTmaRows * (BM + kTmaBn) * kTmaRowBytes; }
template <int BM, int STAGES>
constexpr int tma_smem_bytes() { return STAGES * tma_stage_bytes<BM>() + STAGES * 8 + 1024; }  // + barriers, alignment

// BM/64 warpgroups each own 64 rows of A (channels of the plain operand) × the tile's 128
// columns of B (channels c0… of one tap). Thread 0 also issues the copies: stage kt +
// STAGES − 2 is requested once every warpgroup has waited for stage kt − 2's wgmma (the
// barrier at the top of the loop), so the copies run two stages ahead of the math. Tiles of
// 256 rows wherever A has them: with 128 the seed's conv2 was slower (more bytes from the L2
// per FLOP), and clusters of three blocks sharing A's copies by multicast slower still (in
// lockstep; docs/BENCHMARKS.md, "The fp32 weight gradient of conv2 on the tf32 warpgroup
// MMA").
template <int BM, int STAGES>
__global__ void __launch_bounds__(BM * 2) wgrad_wgmma_tf32_kernel(const __grid_constant__ CUtensorMap map_a,
                                                                 const __grid_constant__ CUtensorMap map_b,
                                                                 const WgradK p, const WgradTaps taps) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int A_ROW = BM * kTmaRowBytes, B_ROW = kTmaBn * kTmaRowBytes, STAGE = tma_stage_bytes<BM>();
  constexpr int AHEAD = STAGES - 2;
  static_assert(STAGES >= 3 && (BM == 128 || BM == 256), "tile");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t sbase = smem_u32(ptx::align_to_swizzle_atom(smem_raw));
  const uint32_t bars = sbase + STAGES * STAGE;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
  const int i0 = blockIdx.x * BM, j0 = blockIdx.y * kTmaBn;
  const int64_t p_begin = int64_t(blockIdx.z) * p.pix_per_split;
  const int64_t p_end = p_begin + p.pix_per_split < p.P ? p_begin + p.pix_per_split : p.P;
  const int KT = p_end > p_begin ? int((p_end - p_begin + 16 * kTmaRows - 1) / (16 * kTmaRows)) : 0;
  // The tile's tap (as chunk_col decodes a patch column) and its first channel, in the copy
  // shifted by the tap's column offset.
  const int tap = j0 / taps.b_cs, c0 = j0 - tap * taps.b_cs;
  int ky = tap / 3, kx = tap % 3;
  if (taps.flipped) {
    ky = 2 - ky;
    kx = 2 - kx;
  }
  const int dy = ky - 1, b_row0 = kx * taps.b_cs + c0;  // copy kx holds x + kx − 1

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
    for (int r = 0; r < kTmaRows; ++r) {
      // Pixel rows never straddle a split (splits are multiples of 64 pixels); a row past
      // this split's end is asked at image `images`, outside the tensor: zeros.
      const int64_t row = (p_begin + int64_t(kt) * 16 * kTmaRows) / 16 + r;
      int n = taps.images, y = 0;
      if (row * 16 < p_end) {
        n = int(row / p.gh);
        y = int(row - int64_t(n) * p.gh);
      }
      ptx::tma_load_4d(stage + r * A_ROW, &map_a, bar, 0, y, n, i0);
      ptx::tma_load_4d(stage + kTmaRows * A_ROW + r * B_ROW, &map_b, bar, 0, y + dy, n, b_row0);
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
    for (int r = 0; r < kTmaRows; ++r) {
      const uint64_t da = ptx::wgmma_desc_sw64(stage + r * A_ROW + wg * 64 * kTmaRowBytes);
      const uint64_t db = ptx::wgmma_desc_sw64(stage + kTmaRows * A_ROW + r * B_ROW);
      ptx::wgmma_m64n128k8_tf32(acc, da, db);  // pixels 0–7 of the row
      ptx::wgmma_m64n128k8_tf32(acc, da + 2, db + 2);  // 8–15: 32 bytes on
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
#if CUDART_VERSION >= 12050
    AE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
#else  // toolkits 12.0–12.4: the one form they have
    AE_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &found));
#endif
    if (!f || found != cudaDriverEntryPointSuccess)
      throw std::runtime_error("the CUDA driver offers no cuTensorMapEncodeTiled");
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A channel-major operand [channels][images][gh][16] (fp32) as a 4-D tensor, boxes of one
// image row × box_rows channels in the 64-byte swizzle.
CUtensorMap channel_major_map(const float* base, int gh, int images, int channels, int box_rows) {
  CUtensorMap m{};
  const cuuint64_t dims[4] = {16, cuuint64_t(gh), cuuint64_t(images), cuuint64_t(channels)};
  const cuuint64_t strides[3] = {kTmaRowBytes, cuuint64_t(kTmaRowBytes) * gh, cuuint64_t(kTmaRowBytes) * gh * images};
  const cuuint32_t box[4] = {16, 1, 1, cuuint32_t(box_rows)};
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  const CUresult r = encode_tiled()(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, const_cast<float*>(base), dims, strides,
                                    box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("wgrad_igemm: cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ") for " +
                             std::to_string(channels) + " channels of " + std::to_string(images) + "×" +
                             std::to_string(gh) + "×16");
  return m;
}

template <int BM, int STAGES>
void launch_tf32(const WgradK& k, const WgradTaps& taps, const float* a_cm, const float* b_cm, cudaStream_t stream) {
  const CUtensorMap ma = channel_major_map(a_cm, k.gh, taps.images, taps.a_cs, BM);
  const CUtensorMap mb = channel_major_map(b_cm, k.gh, taps.images, 3 * taps.b_cs, kTmaBn);
  dim3 grid(k.Mp / BM, k.Np / kTmaBn, k.splits);
  allow_dynamic_smem(wgrad_wgmma_tf32_kernel<BM, STAGES>, tma_smem_bytes<BM, STAGES>());
  wgrad_wgmma_tf32_kernel<BM, STAGES><<<grid, BM * 2, tma_smem_bytes<BM, STAGES>(), stream>>>(ma, mb, k, taps);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_wgrad_wgmma_tf32(const WgradK& k, const WgradTaps& taps, const float* a_cm, const float* b_cm, int bm,
                             cudaStream_t stream) {
  if (k.gw != 16 || taps.a_cs % bm != 0 || taps.b_cs % kTmaBn != 0 || k.Np != 9 * taps.b_cs || k.Mp != taps.a_cs)
    throw std::invalid_argument("wgrad_igemm: the channel-major tf32 engine needs a grid 16 wide and pitches of 128");
  if (bm == 256)
    launch_tf32<256, 4>(k, taps, a_cm, b_cm, stream);
  else
    launch_tf32<128, 6>(k, taps, a_cm, b_cm, stream);
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
