// The implicit-GEMM convolution on Hopper's warpgroup MMA (the ConvTile::wgmma_* tiles of
// conv_igemm; docs/GPU.md, "Warpgroup MMA"). The same gather, the same epilogues and the
// same grid as the mma.sync engine (conv_igemm.cuh, conv_igemm.cu); what differs is the
// math: two warpgroups of 128 threads, each computing a 64-row × WN-column block with
// wgmma.mma_async, whose operands are read straight from shared memory (no ldmatrix, no
// operand registers), staged in the 128-byte swizzle it requires. The loads stay cp.async:
// A rows are gathered pixel by pixel, which the tensor memory accelerator cannot do for
// this layout, and a stage's loads overlap the previous stage's wgmma.
//
// Compiled for sm_90a alone (the Makefile's WGMMA_ARCH): the kernels exist for devices of
// compute capability 9.0 only, and conv_igemm offers these tiles only there.
#include <cuda_bf16.h>

#include <stdexcept>
#include <type_traits>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/conv_igemm.cuh"
#include "kernels/ae/cuda/wgmma_ptx.cuh"

namespace ae::cuda::igemm {
namespace {

constexpr int kWarpgroupRows = 64;  // rows of one wgmma (m64)

template <int BM, int BN, int STAGES>
constexpr int wgmma_smem_bytes() {
  // + 1,024: the dynamic shared memory is aligned up to the swizzle's atom in the kernel.
  return std::max(STAGES * (BM + BN) * kRowBytes, BM * acc_tile_ld<BN>() * 4) + 1024;
}

// D(64×N) += A·B over one k-step of 32 bytes (bf16 k16, tf32 k8).
template <typename T, int N>
__device__ __forceinline__ void wgmma_step(float (&d)[N / 2], uint64_t a, uint64_t b) {
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  if constexpr (N == 128) kBf16 ? ptx::wgmma_m64n128k16_bf16(d, a, b) : ptx::wgmma_m64n128k8_tf32(d, a, b);
  else kBf16 ? ptx::wgmma_m64n64k16_bf16(d, a, b) : ptx::wgmma_m64n64k8_tf32(d, a, b);
}

// BM = 128: the two warpgroups split the rows (64 each, all BN columns); BM = 64: they
// split the columns (BN/2 each). STAGES ≥ 3: stage kt + STAGES − 2 is loaded while stage
// kt's wgmma runs beside stage kt − 1's, so a stage's slot is refilled only after every
// warpgroup has waited for the wgmma that read it (the barrier at the top of the loop).
template <typename T, int BM, int BN, int STAGES, typename Epilogue>
__global__ void __launch_bounds__(256) conv_wgmma_kernel(const ConvK p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int NT = 256;
  constexpr int WGS_M = BM / kWarpgroupRows, WN = BN * WGS_M / 2;  // a warpgroup's columns
  static_assert((BM == 128 || BM == 64) && (WN == 64 || WN == 128) && STAGES >= 3, "wgmma tile");
  using Loader = ConvStageLoader<T, BM, BN, NT, kRowBytes, true, Epilogue::kQuadRows>;
  constexpr int STAGE = Loader::STAGE_BYTES, CLD = acc_tile_ld<BN>();
  constexpr int KSTEPS = kRowBytes / 32;

  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = ptx::align_to_swizzle_atom(smem_raw);
  const uint32_t sbase = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
  const int wg_m = WGS_M == 2 ? wg : 0, wg_n = WGS_M == 2 ? 0 : wg;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int par = p.parity ? int(blockIdx.z) : 0;
  const Loader loader(p, m0, n0, par);
  // This warpgroup's A rows and B columns in a stage: 1,024-aligned blocks.
  const uint32_t a_block = uint32_t(wg_m * kWarpgroupRows * kRowBytes);
  const uint32_t b_block = uint32_t(Loader::A_BYTES + wg_n * WN * kRowBytes);

  float acc[WN / 2];
#pragma unroll
  for (int i = 0; i < WN / 2; ++i) acc[i] = 0.f;

  const int KT = p.Kpad / Loader::KE;
  constexpr int AHEAD = STAGES - 2;
#pragma unroll
  for (int s = 0; s < AHEAD; ++s) {
    if (s < KT) loader.load(p, s, sbase + s * STAGE);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<AHEAD - 1>();  // this thread's copies of stage kt have landed
    ptx::fence_proxy_async_smem();
    __syncthreads();  // everyone's have, and stage kt − 2's wgmma are done (slot reuse)
    if (kt + AHEAD < KT) loader.load(p, kt + AHEAD, sbase + ((kt + AHEAD) % STAGES) * STAGE);
    cp_async_commit();
    const uint32_t stage = sbase + (kt % STAGES) * STAGE;
    const uint64_t da = ptx::wgmma_desc_sw128(stage + a_block), db = ptx::wgmma_desc_sw128(stage + b_block);
    ptx::wgmma_fence_operands(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) wgmma_step<T, WN>(acc, da + 2 * ks, db + 2 * ks);
    ptx::wgmma_commit();
    ptx::wgmma_wait<1>();
    ptx::wgmma_fence_operands(acc);
  }
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operands(acc);
  cp_async_wait<0>();
  __syncthreads();

  // The accumulators in mma.sync's m16n8 layout (one 16-row block per warp): through the
  // same fp32 tile and epilogue as the other engine.
  float* ct = reinterpret_cast<float*>(smem);
  const int row0 = wg_m * kWarpgroupRows + (warp % 4) * 16, col0 = wg_n * WN;
  store_acc_tile<CLD>(ct, reinterpret_cast<const float(&)[1][WN / 8][4]>(acc), row0, col0, lane);
  __syncthreads();
  Epilogue::template run<T, BM, BN, NT>(p, ct, m0, n0, par);
#else
  __trap();  // never launched: conv_igemm offers these tiles on compute capability 9.0 only
#endif
}

template <typename T, int BM, int BN, int ST, typename Epilogue>
void launch(const ConvK& k, cudaStream_t stream) {
  dim3 grid((k.M + BM - 1) / BM, (std::max(k.cols, k.ldo) + BN - 1) / BN, k.parity ? 4 : 1);
  allow_dynamic_smem(conv_wgmma_kernel<T, BM, BN, ST, Epilogue>, wgmma_smem_bytes<BM, BN, ST>());
  conv_wgmma_kernel<T, BM, BN, ST, Epilogue><<<grid, 256, wgmma_smem_bytes<BM, BN, ST>(), stream>>>(k);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace

template <typename T, typename Epilogue>
void launch_conv_wgmma(ConvTile tile, const ConvK& k, cudaStream_t stream) {
  switch (tile) {
    case ConvTile::wgmma_m128n128s4: launch<T, 128, 128, 4, Epilogue>(k, stream); return;
    case ConvTile::wgmma_m128n128s3: launch<T, 128, 128, 3, Epilogue>(k, stream); return;
    case ConvTile::wgmma_m64n128s4: launch<T, 64, 128, 4, Epilogue>(k, stream); return;
    default: break;
  }
  throw std::invalid_argument("conv_igemm: no warpgroup-MMA kernel for this tile");
}

#define AE_CONV_WGMMA_INSTANTIATE(T, E) \
  template void launch_conv_wgmma<T, E>(ConvTile, const ConvK&, cudaStream_t);
#define AE_CONV_WGMMA_INSTANTIATE_ALL(T)              \
  AE_CONV_WGMMA_INSTANTIATE(T, StoreEpilogue)         \
  AE_CONV_WGMMA_INSTANTIATE(T, SubpixelStoreEpilogue) \
  AE_CONV_WGMMA_INSTANTIATE(T, PoolEpilogue)          \
  AE_CONV_WGMMA_INSTANTIATE(T, ReluMaskEpilogue)      \
  AE_CONV_WGMMA_INSTANTIATE(T, UnpoolMaskEpilogue)    \
  AE_CONV_WGMMA_INSTANTIATE(T, LossEpilogue)
AE_CONV_WGMMA_INSTANTIATE_ALL(float)
AE_CONV_WGMMA_INSTANTIATE_ALL(__nv_bfloat16)
#undef AE_CONV_WGMMA_INSTANTIATE_ALL
#undef AE_CONV_WGMMA_INSTANTIATE

}  // namespace ae::cuda::igemm
