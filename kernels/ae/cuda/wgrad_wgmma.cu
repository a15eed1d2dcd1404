// The weight-gradient GEMM on Hopper's warpgroup MMA, bf16, 128×128 tiles (docs/GPU.md,
// "Warpgroup MMA"): the same split over pixel ranges, the same gathers and the same
// workspace as wgrad_igemm.cu's mma.sync kernel. Both operands are pixel rows ([pixel]
// [column], the reduction running down the rows), which wgmma reads as MN-major bf16
// operands straight from shared memory: each stage holds, per operand, two blocks of 64
// columns × 64 pixel rows in the 128-byte swizzle. (tf32 has no MN-major form: the fp32
// weight gradients stay on mma.sync; a transposing gather into K-major rows was slower,
// docs/GPU.md.)
//
// Compiled for sm_90a alone (the Makefile's WGMMA_ARCH), offered on compute capability 9.0.
#include <cuda_bf16.h>

#include <algorithm>

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

}  // namespace

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
