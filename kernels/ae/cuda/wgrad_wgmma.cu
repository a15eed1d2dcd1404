// The weight-gradient GEMM on Hopper's warpgroup MMA, 128×128 tiles (docs/GPU.md, "Warpgroup
// MMA"): the same split over pixel ranges, the same gathers and the same workspace as
// wgrad_igemm.cu's mma.sync kernel. Both operands are pixel rows ([pixel][column], the
// reduction running down the rows).
//   bf16: wgmma reads them as MN-major operands straight from shared memory: per operand
//     and stage, two blocks of 64 columns × 64 pixel rows in the 128-byte swizzle, copied
//     by cp.async as the mma.sync kernel does.
//   tf32 has no MN-major form, so the gather transposes: a thread loads 4 pixels × 4
//     columns (four 16-byte loads), and stores 4 columns × 4 pixels (four 16-byte stores)
//     into K-major rows, one row of 32 pixels per column (conv_wgmma's layout). The loads
//     of stage kt + 2 are issued after stage kt's wgmma and stored an iteration later.
//
// Compiled for sm_90a alone (the Makefile's WGMMA_ARCH), offered on compute capability 9.0.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/wgmma_ptx.cuh"
#include "kernels/ae/cuda/wgrad_igemm.cuh"

namespace ae::cuda::igemm {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kTile = 128;                // a block's rows and columns
constexpr int kOperandBytes = 128 * kTile;  // one operand's stage: 128 bytes per column (16 KB)
constexpr int kStageBytes = 2 * kOperandBytes;
template <typename T>
constexpr int kKR = 128 / int(sizeof(T));  // pixels per stage: 64 bf16, 32 tf32
template <typename T>
constexpr int kStages = sizeof(T) == 2 ? 4 : 3;
template <typename T>
constexpr int kSmemBytes = kStages<T> * kStageBytes + 1024;  // + alignment to the swizzle's atom

// Two warpgroups split the tile's 128 rows; each runs m64n128k16 over a stage's 64 pixels
// (four k-steps). Stage kt + kStages − 2 is gathered while stage kt's wgmma runs beside
// stage kt − 1's (as conv_wgmma_kernel).
template <bool UNPOOLED_A, bool POW2>
__global__ void __launch_bounds__(256) wgrad_wgmma_bf16_kernel(const WgradK p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kKR = igemm::kKR<bf16>, kStages = igemm::kStages<bf16>;
  constexpr int NT = 256, CH = 8, CPR = kTile * 2 / 16;  // chunks per pixel row
  constexpr int CHUNKS = kKR * CPR, IT = CHUNKS / NT;
  constexpr int AHEAD = kStages - 2;
  static_assert(NT % CPR == 0 && CHUNKS % NT == 0, "slots");

  extern __shared__ unsigned char smem_raw[];
  const uint32_t sbase = smem_u32(smem_raw) + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
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

  // The accumulators in mma.sync's m16n8 layout: warp w of group g holds rows 64g + 16(w%4)
  // + lane/4 (and +8), columns 8j + 2·(lane%4) (and +1).
  float* part = p.partial + size_t(blockIdx.z) * p.Mp * p.Np;
  const int i = i0 + wg * 64 + (warp % 4) * 16 + (lane >> 2);
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    const int j = j0 + jj * 8 + (lane & 3) * 2;
    *reinterpret_cast<float2*>(part + size_t(i) * p.Np + j) = make_float2(acc[4 * jj], acc[4 * jj + 1]);
    *reinterpret_cast<float2*>(part + size_t(i + 8) * p.Np + j) = make_float2(acc[4 * jj + 2], acc[4 * jj + 3]);
  }
#else
  __trap();  // never launched: wgrad_igemm offers this kernel on compute capability 9.0 only
#endif
}

// tf32: three stages (two blocks per multiprocessor), the loads of the next stage in
// registers across an iteration. No unpooled operand.
template <bool POW2>
__global__ void __launch_bounds__(256, 2) wgrad_wgmma_tf32_kernel(const WgradK p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kKR = igemm::kKR<float>, kStages = igemm::kStages<float>;
  static_assert(kStages == 3, "stage kt + 1's slot is stage kt − 2's");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t sbase = smem_u32(smem_raw) + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
  const int i0 = blockIdx.x * kTile, j0 = blockIdx.y * kTile;
  const int split = int(blockIdx.z) % p.splits, par = p.parity ? int(blockIdx.z) / p.splits : 0;
  const int64_t p_begin = int64_t(split) * p.pix_per_split;
  const int64_t p_end = p_begin + p.pix_per_split < p.P ? p_begin + p.pix_per_split : p.P;
  const int KT = p_end > p_begin ? int((p_end - p_begin + kKR - 1) / kKR) : 0;

  // This thread: pixels 4·pg … 4·pg + 3 of a stage, columns 4·cg … 4·cg + 3 of each operand.
  // The 8 lanes of one 16-byte store phase share cg and differ in pg, so their chunks
  // (pg ^ row % 8) fall in different banks.
  const int pg = lane & 7, cg = (lane >> 3) + 4 * warp;
  const ChunkCol a_col = chunk_col<float>(p.a, p.gw, par, i0 + 4 * cg);
  const ChunkCol b_col = chunk_col<float>(p.b, p.gw, par, j0 + 4 * cg);
  float4 ra[4], rb[4];

  auto fetch = [&](int kt) {
    const int pix0 = int(p_begin) + kt * kKR + 4 * pg;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int pix = pix0 + e;
      const float* ga = pix_chunk_src<float, POW2>(p.a, a_col, p, par, pix, pix < p_end);
      const float* gb = pix_chunk_src<float, POW2>(p.b, b_col, p, par, pix, pix < p_end);
      ra[e] = ga ? __ldg(reinterpret_cast<const float4*>(ga)) : make_float4(0.f, 0.f, 0.f, 0.f);
      rb[e] = gb ? __ldg(reinterpret_cast<const float4*>(gb)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  // Column 4·cg + c of an operand is K-major row 4·cg + c: its pixels 4·pg … 4·pg + 3 are
  // chunk pg of that row.
  auto store = [&](int kt) {
    const uint32_t sA = sbase + (kt % kStages) * kStageBytes, sB = sA + kOperandBytes;
    const auto put = [&](uint32_t base, const float4 (&r)[4]) {
      const float4 c0 = make_float4(r[0].x, r[1].x, r[2].x, r[3].x), c1 = make_float4(r[0].y, r[1].y, r[2].y, r[3].y);
      const float4 c2 = make_float4(r[0].z, r[1].z, r[2].z, r[3].z), c3 = make_float4(r[0].w, r[1].w, r[2].w, r[3].w);
      const float4 cols[4] = {c0, c1, c2, c3};
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = 4 * cg + c;
        st_shared16(base + row * 128 + 16 * (pg ^ (row & 7)), *reinterpret_cast<const uint4*>(&cols[c]));
      }
    };
    put(sA, ra);
    put(sB, rb);
  };

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.f;

  // Stage kt + 1 is stored during iteration kt from the registers fetched during
  // iteration kt − 1, so a load has a whole iteration to arrive.
  if (KT > 0) {
    fetch(0);
    store(0);
  }
  if (KT > 1) fetch(1);
  for (int kt = 0; kt < KT; ++kt) {
    ptx::fence_proxy_async_smem();  // this thread's stores of stage kt
    __syncthreads();                // everyone's; stage kt − 2's wgmma done (slot reuse)
    const uint32_t stage = sbase + (kt % kStages) * kStageBytes;
    const uint64_t da = ptx::wgmma_desc_sw128(stage + wg * 64 * 128), db = ptx::wgmma_desc_sw128(stage + kOperandBytes);
    ptx::wgmma_fence_operands(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKR / 8; ++ks) ptx::wgmma_m64n128k8_tf32(acc, da + 2 * ks, db + 2 * ks);
    ptx::wgmma_commit();
    if (kt + 1 < KT) store(kt + 1);  // its slot held stage kt − 2
    if (kt + 2 < KT) fetch(kt + 2);
    ptx::wgmma_wait<1>();
    ptx::wgmma_fence_operands(acc);
  }
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operands(acc);

  float* part = p.partial + size_t(blockIdx.z) * p.Mp * p.Np;
  const int i = i0 + wg * 64 + (warp % 4) * 16 + (lane >> 2);
#pragma unroll
  for (int jj = 0; jj < 16; ++jj) {
    const int j = j0 + jj * 8 + (lane & 3) * 2;
    *reinterpret_cast<float2*>(part + size_t(i) * p.Np + j) = make_float2(acc[4 * jj], acc[4 * jj + 1]);
    *reinterpret_cast<float2*>(part + size_t(i + 8) * p.Np + j) = make_float2(acc[4 * jj + 2], acc[4 * jj + 3]);
  }
#else
  __trap();
#endif
}

template <typename T, bool UNPOOLED_A, bool POW2>
auto wgrad_wgmma_kernel() {
  if constexpr (sizeof(T) == 2) return wgrad_wgmma_bf16_kernel<UNPOOLED_A, POW2>;
  else return wgrad_wgmma_tf32_kernel<POW2>;
}

}  // namespace

template <typename T, bool UNPOOLED_A>
void launch_wgrad_wgmma(const WgradK& k, int splits, cudaStream_t stream) {
  static_assert(sizeof(T) == 2 || !UNPOOLED_A, "tf32: no unpooled operand");
  dim3 grid(k.Mp / kTile, k.Np / kTile, splits * (k.parity ? 4 : 1));
  if (k.div_gw.log2 >= 0 && k.div_ghw.log2 >= 0)
    wgrad_wgmma_kernel<T, UNPOOLED_A, true>()<<<grid, 256, kSmemBytes<T>, stream>>>(k);
  else
    wgrad_wgmma_kernel<T, UNPOOLED_A, false>()<<<grid, 256, kSmemBytes<T>, stream>>>(k);
  AE_CUDA_LAUNCH_CHECK();
}
template void launch_wgrad_wgmma<bf16, false>(const WgradK&, int, cudaStream_t);
template void launch_wgrad_wgmma<bf16, true>(const WgradK&, int, cudaStream_t);
template void launch_wgrad_wgmma<float, false>(const WgradK&, int, cudaStream_t);
template <>
void launch_wgrad_wgmma<float, true>(const WgradK&, int, cudaStream_t) {
  throw std::logic_error("wgrad_wgmma: tf32 takes no unpooled operand");
}

void allow_wgrad_wgmma_smem() {
  const auto allow = [](auto kernel, int bytes) {
    AE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  };
  allow(wgrad_wgmma_bf16_kernel<false, true>, kSmemBytes<bf16>);
  allow(wgrad_wgmma_bf16_kernel<false, false>, kSmemBytes<bf16>);
  allow(wgrad_wgmma_bf16_kernel<true, true>, kSmemBytes<bf16>);
  allow(wgrad_wgmma_bf16_kernel<true, false>, kSmemBytes<bf16>);
  allow(wgrad_wgmma_tf32_kernel<true>, kSmemBytes<float>);
  allow(wgrad_wgmma_tf32_kernel<false>, kSmemBytes<float>);
}

template <typename T>
int wgrad_wgmma_blocks_per_sm() {
  int n = 0;
  AE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgrad_wgmma_kernel<T, false, false>(), 256, kSmemBytes<T>));
  return std::max(n, 1);
}
template int wgrad_wgmma_blocks_per_sm<bf16>();
template int wgrad_wgmma_blocks_per_sm<float>();

}  // namespace ae::cuda::igemm
