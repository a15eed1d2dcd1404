// Implicit-GEMM convolution (conv_igemm, ops.cuh; docs/GPU.md): rows are output
// pixels, columns output channels, the reduction k = tap·Cs + c is gathered from the NHWC
// source on the fly, and the epilogue (bias, ReLU, pool, masks, unpool, loss) runs on the
// tile in shared memory. This file holds the mma.sync engine (any GPU from sm_80), the
// halo kernel of the output layer, and the dispatch, which sends the ConvTile::wgmma_*
// tiles to the warpgroup-MMA engine (conv_wgmma.cu, Hopper). What both engines share
// (the parameter, the loads, the epilogues) is conv_igemm.cuh.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/conv_igemm.cuh"

namespace ae::cuda {
namespace {

using namespace ptx;
using namespace igemm;

template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, typename Epilogue>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32) conv_igemm_kernel(const ConvK p) {
  constexpr int NT = WARPS_M * WARPS_N * 32;
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile");
  using Loader = ConvStageLoader<T, BM, BN, NT, kRowPitch, false, Epilogue::kQuadRows>;
  constexpr int A_STAGE = Loader::A_BYTES, STAGE = Loader::STAGE_BYTES;
  constexpr int CLD = acc_tile_ld<BN>();

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const int par = p.parity ? int(blockIdx.z) : 0;  // output parity (dy,dx) = (par>>1, par&1)
  const Loader loader(p, m0, n0, par);
  auto load_stage = [&](int kt, uint32_t stage_addr) { loader.load(p, kt, stage_addr); };

  float acc[MI][NI][4];
  igemm::zero_acc(acc);

  // ldmatrix row addresses of this lane, relative to a stage (A: rows of the warp's
  // 16-row blocks; B: rows of its 16-column blocks).
  const uint32_t a_ld = uint32_t((wm * WM + (lane & 15)) * kRowPitch + (lane >> 4) * 16);
  const uint32_t b_ld = uint32_t(A_STAGE + (wn * WN + (lane & 7) + ((lane >> 4) << 3)) * kRowPitch + ((lane >> 3) & 1) * 16);

  auto compute_stage = [&](uint32_t stage_addr) {
#pragma unroll
    for (int ks = 0; ks < kRowBytes / 32; ++ks) {  // four mma k-steps of 32 bytes per stage
      uint32_t af[MI][4], bfr[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(af[mi], stage_addr + a_ld + mi * 16 * kRowPitch + ks * 32);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, stage_addr + b_ld + nj * 16 * kRowPitch + ks * 32);
        bfr[2 * nj][0] = r[0];
        bfr[2 * nj][1] = r[1];
        bfr[2 * nj + 1][0] = r[2];
        bfr[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int r = 0; r < 4; ++r) Mma<T>::fix(af[mi][r]);
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        Mma<T>::fix(bfr[ni][0]);
        Mma<T>::fix(bfr[ni][1]);
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) Mma<T>::mma(acc[mi][ni], af[mi], bfr[ni]);
    }
  };

  // Stage slots rotate without a modulo: read_slot is computed on, write_slot refilled.
  const int KT = p.Kpad / Loader::KE;
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < KT) load_stage(s, sbase + s * STAGE);
    cp_async_commit();
  }
  uint32_t read_addr = sbase, write_addr = sbase + (STAGES - 1) * STAGE;
  const uint32_t last_addr = sbase + (STAGES - 1) * STAGE;
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < KT) load_stage(kt + STAGES - 1, write_addr);
    cp_async_commit();
    compute_stage(read_addr);
    read_addr = read_addr == last_addr ? sbase : read_addr + STAGE;
    write_addr = write_addr == last_addr ? sbase : write_addr + STAGE;
  }
  cp_async_wait<0>();
  __syncthreads();

  // ---- epilogue: the fp32 tile goes through shared memory so that every mode can read
  // whole rows / 2×2 blocks and write channel-contiguous (coalesced) NHWC output.
  float* ct = reinterpret_cast<float*>(smem);
  store_acc_tile<CLD>(ct, acc, wm * WM, wn * WN, lane);
  __syncthreads();

  Epilogue::template run<T, BM, BN, NT>(p, ct, m0, n0, par);
}

// ---- the decoder's output layer: "upsample ×2, then 3×3" to ≤ 4 channels ------------------
// In the sub-pixel form (ConvShape::up2_subpixel) this is a GEMM with 12 columns and a
// 2,304-deep reduction, so the generic kernel, which gathers every row's nine taps on its
// own, moves each source pixel through L2 nine times and is bound by that. Here a block
// owns 128 source pixels (8 rows of a 16-wide map), copies their 10×18 halo into shared
// memory once per 128-byte chunk of channels (with the weights of that chunk, all nine
// taps), and the nine taps become nine shifted ldmatrix row addresses into the halo. Eight
// warps, one map row each: the block's two 93 KB stages allow two blocks per SM, and with
// four warps of two rows the loads' latency went unhidden (docs/GPU.md, "The 3-channel output
// layer").
constexpr int kHaloRows = 8, kHaloW = 16, kHaloPix = (kHaloRows + 2) * (kHaloW + 2);
constexpr int kHaloAStage = kHaloPix * kRowPitch, kHaloStage = kHaloAStage + 9 * 16 * kRowPitch;
constexpr int kHaloSmem = 2 * kHaloStage;

template <typename T, typename Epilogue>
__global__ void __launch_bounds__(256) subpixel_halo_kernel(const ConvK p) {
  constexpr int BM = kHaloRows * kHaloW, BN = 16, NT = 256, HC = kHaloW + 2;
  constexpr int CH = 16 / int(sizeof(T)), KE = kRowBytes / int(sizeof(T));
  constexpr int MI = 1, NI = 2;  // each of the 8 warps: 16 rows (one map row) × 16 columns
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.x * BM;
  int img, r0;  // a block is 8 whole rows of one image (use_subpixel_halo)
  p.div_ghw.divmod(m0, img, r0);
  const int y0 = r0 / kHaloW;
  const T* src = static_cast<const T*>(p.src);
  const T* wgt = static_cast<const T*>(p.weights);
  const int Cs = 1 << p.lcs, KT = Cs / KE;

  // Each thread copies one 16-byte chunk `ch` of every 32nd shared row from `row0` on: of
  // the halo's pixels (A) and of the nine taps' weight rows (B, row = tap·16 + n). Where
  // each of its rows comes from is the same for every stage but for the channel offset, so
  // it is worked out once here (−1: a zero row, outside the map or past the columns).
  constexpr int kRowsPerPass = NT / kChunksPerRow;
  constexpr int kWeightRows = 9 * BN;
  constexpr int kHaloIt = (kHaloPix + kRowsPerPass - 1) / kRowsPerPass;
  constexpr int kWeightIt = (kWeightRows + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(NT % kChunksPerRow == 0, "whole rows per pass");
  const int ch = tid % kChunksPerRow, row0 = tid / kChunksPerRow;
  const T* img_src = src + size_t(img) * p.Hs * kHaloW * Cs + ch * CH;
  int halo_at[kHaloIt], weight_at[kWeightIt];
#pragma unroll
  for (int j = 0; j < kHaloIt; ++j) {
    const int hp = row0 + j * kRowsPerPass, y = y0 - 1 + hp / HC, x = hp % HC - 1;
    const bool ok = hp < kHaloPix && unsigned(y) < unsigned(p.Hs) && unsigned(x) < unsigned(kHaloW);
    halo_at[j] = ok ? (y * kHaloW + x) * Cs : -1;
  }
#pragma unroll
  for (int j = 0; j < kWeightIt; ++j) {
    const int row = row0 + j * kRowsPerPass, t = row / BN, n = row % BN;
    weight_at[j] = row < kWeightRows && n < p.cols ? n * int(p.Kpad) + t * Cs + ch * CH : -1;
  }
  const uint32_t chunk_at = uint32_t(row0 * kRowPitch + ch * 16);
  auto load_stage = [&](int kt, uint32_t st) {
    const int c0 = kt * KE;
#pragma unroll
    for (int j = 0; j < kHaloIt; ++j)
      if (j < kHaloIt - 1 || row0 + j * kRowsPerPass < kHaloPix)
        cp_async16(st + chunk_at + j * kRowsPerPass * kRowPitch, halo_at[j] >= 0 ? img_src + halo_at[j] + c0 : src,
                   halo_at[j] >= 0);
#pragma unroll
    for (int j = 0; j < kWeightIt; ++j)
      if (j < kWeightIt - 1 || row0 + j * kRowsPerPass < kWeightRows)
        cp_async16(st + kHaloAStage + chunk_at + j * kRowsPerPass * kRowPitch,
                   weight_at[j] >= 0 ? wgt + weight_at[j] + c0 : wgt, weight_at[j] >= 0);
  };

  float acc[MI][NI][4];
  igemm::zero_acc(acc);

  // ldmatrix rows: GEMM row warp·16 + (lane & 15) is map pixel (warp, lane & 15), whose tap
  // (ky,kx) sits at halo pixel (warp + ky, (lane & 15) + kx).
  uint32_t a_ld[MI];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) a_ld[mi] = uint32_t(((MI * warp + mi) * HC + (lane & 15)) * kRowPitch + (lane >> 4) * 16);
  const uint32_t b_ld = uint32_t(kHaloAStage + ((lane & 7) + ((lane >> 4) << 3)) * kRowPitch + ((lane >> 3) & 1) * 16);

  load_stage(0, sbase);
  cp_async_commit();
  for (int kt = 0; kt < KT; ++kt) {
    const uint32_t st = sbase + uint32_t(kt & 1) * kHaloStage;
    if (kt + 1 < KT) load_stage(kt + 1, sbase + uint32_t((kt + 1) & 1) * kHaloStage);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
#pragma unroll
    for (int t = 0; t < 9; ++t) {
      const uint32_t tap_off = uint32_t(((t / 3) * HC + t % 3) * kRowPitch);
#pragma unroll
      for (int ks = 0; ks < kRowBytes / 32; ++ks) {
        uint32_t af[MI][4], bfr[NI][2], r[4];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(af[mi], st + a_ld[mi] + tap_off + ks * 32);
        ldmatrix_x4(r, st + b_ld + t * BN * kRowPitch + ks * 32);
        bfr[0][0] = r[0];
        bfr[0][1] = r[1];
        bfr[1][0] = r[2];
        bfr[1][1] = r[3];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) Mma<T>::mma(acc[mi][ni], af[mi], bfr[ni]);
      }
    }
    __syncthreads();  // this stage's buffer is refilled by the next iteration
  }
  cp_async_wait<0>();

  constexpr int CLD = acc_tile_ld<BN>();
  float* ct = reinterpret_cast<float*>(smem);
  store_acc_tile<CLD>(ct, acc, warp * 16 * MI, 0, lane);
  __syncthreads();
  Epilogue::template run<T, BM, BN, NT>(p, ct, m0, 0, 0);
}

// Whether the halo kernel takes this convolution: a 16-wide source of whole 8-row blocks
// and whole 128-byte channel stages; other sizes take the generic kernel.
bool use_subpixel_halo(const ConvK& k, int elem_bytes) {
  return k.sub_k && k.Ws == kHaloW && k.Hs % kHaloRows == 0 && (1 << k.lcs) * elem_bytes % kRowBytes == 0 &&
         k.cols <= 16 && k.M % (kHaloRows * kHaloW) == 0;
}

template <typename T, int BM, int BN, int WM_, int WN_, int ST, typename Epilogue>
void launch_conv(const ConvK& k, cudaStream_t stream) {
  constexpr int smem = conv_smem_bytes<BM, BN, ST>();
  // Columns up to ldo: every epilogue but up2_subpixel's writes the channel padding too.
  dim3 grid((k.M + BM - 1) / BM, (k.cols + BN - 1) / BN, k.parity ? 4 : 1);
  if (!k.sub_k) grid.y = (std::max(k.cols, k.ldo) + BN - 1) / BN;
  allow_dynamic_smem(conv_igemm_kernel<T, BM, BN, WM_, WN_, ST, Epilogue>, smem);
  conv_igemm_kernel<T, BM, BN, WM_, WN_, ST, Epilogue><<<grid, WM_ * WN_ * 32, smem, stream>>>(k);
  AE_CUDA_LAUNCH_CHECK();
}

// The epilogues that take the sub-pixel form (and so the halo kernel).
template <typename Epilogue>
constexpr bool kTakesSubpixel = std::is_same_v<Epilogue, SubpixelStoreEpilogue> || std::is_same_v<Epilogue, LossEpilogue>;

// The tile rule without timing (ConvTile::automatic).
ConvTile rule_tile(const ConvK& k, int elem_bytes) {
  // The first layer: its own kernel beats the tiles below (docs/GPU.md, "The first layer's
  // own kernel").
  if (im2col_pool_fits(k)) return ConvTile::im2col_pool;
  // A reduction of one or two stages (the first encoder layer, the output layer's input
  // gradient): no pipeline to fill, the time goes to loads and the epilogue, so 64-row
  // blocks with two stages let more of them overlap; of the tiles timed, 64×128 with two
  // stages gave the shortest step (docs/GPU.md, "Short reductions").
  if (k.Kpad / (kRowBytes / elem_bytes) <= 2) return ConvTile::m64n128s2;
  // Too few 128-row tiles to give every multiprocessor two blocks: use 64-row tiles.
  const int64_t tiles128 = int64_t((k.M + 127) / 128) * ((std::max(k.cols, k.ldo) + 127) / 128) * (k.parity ? 4 : 1);
  if (tiles128 < 2 * int64_t(igemm::sm_count())) return ConvTile::m64n128s3;
  // 8 warps of 64×32, 3 stages (4 stages and 4 warps of 64×64 were slower: docs/BENCHMARKS.md)
  return ConvTile::m128n128s3;
}

// The kernel of each tile: 8 warps, of 32×32 (64-row tiles), 64×32 (128×128) or 64×64.
template <typename T, typename Epilogue>
void launch_tile(ConvTile tile, const ConvK& k, cudaStream_t stream) {
  switch (tile) {
    case ConvTile::m64n128s2: launch_conv<T, 64, 128, 2, 4, 2, Epilogue>(k, stream); return;
    case ConvTile::m64n128s3: launch_conv<T, 64, 128, 2, 4, 3, Epilogue>(k, stream); return;
    case ConvTile::m128n128s3: launch_conv<T, 128, 128, 2, 4, 3, Epilogue>(k, stream); return;
    case ConvTile::m256n128s3: launch_conv<T, 256, 128, 4, 2, 3, Epilogue>(k, stream); return;
    case ConvTile::m128n256s3: launch_conv<T, 128, 256, 2, 4, 3, Epilogue>(k, stream); return;
    case ConvTile::wgmma_m128n128s4:
    case ConvTile::wgmma_m128n128s3:
    case ConvTile::wgmma_m64n128s4: launch_conv_wgmma<T, Epilogue>(tile, k, stream); return;
    case ConvTile::im2col_pool:
      if constexpr (std::is_same_v<Epilogue, PoolEpilogue>) {
        launch_conv_im2col_pool<T>(k, stream);
        return;
      }
      break;
    case ConvTile::automatic: break;
  }
  throw std::invalid_argument("conv_igemm: no kernel for this tile");
}

// The one kernel of the narrow GEMMs (≤ 16 columns: 128×16 tiles) and of the sub-pixel
// forms (the halo kernel where it applies): nothing for a tile to choose.
bool has_fixed_kernel(const ConvK& k) { return k.sub_k || (k.cols <= 16 && k.ldo <= 16); }

template <typename T, typename Epilogue>
void dispatch_conv(const ConvK& k, cudaStream_t stream) {
  if constexpr (kTakesSubpixel<Epilogue>) {
    if (use_subpixel_halo(k, int(sizeof(T)))) {
      allow_dynamic_smem(subpixel_halo_kernel<T, Epilogue>, kHaloSmem);
      subpixel_halo_kernel<T, Epilogue><<<unsigned(k.M / (kHaloRows * kHaloW)), 256, kHaloSmem, stream>>>(k);
      AE_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  if (k.cols <= 16 && k.ldo <= 16) {
    launch_conv<T, 128, 16, 4, 1, 3, Epilogue>(k, stream);
    return;
  }
  launch_tile<T, Epilogue>(k.tile == ConvTile::automatic || has_fixed_kernel(k) ? rule_tile(k, int(sizeof(T))) : k.tile,
                           k, stream);
}

// The epilogue functor is chosen here, once per launch.
template <typename T>
void dispatch_epilogue(const ConvK& k, cudaStream_t stream) {
  switch (k.epilogue) {
    case ConvEpilogue::store:
      if (k.sub_k) dispatch_conv<T, SubpixelStoreEpilogue>(k, stream);
      else dispatch_conv<T, StoreEpilogue>(k, stream);
      return;
    case ConvEpilogue::pool: dispatch_conv<T, PoolEpilogue>(k, stream); return;
    case ConvEpilogue::mask: dispatch_conv<T, ReluMaskEpilogue>(k, stream); return;
    case ConvEpilogue::unpool_mask: dispatch_conv<T, UnpoolMaskEpilogue>(k, stream); return;
    case ConvEpilogue::loss: dispatch_conv<T, LossEpilogue>(k, stream); return;
  }
  throw std::invalid_argument("conv_igemm: unknown epilogue");
}

}  // namespace

const char* conv_tile_name(ConvTile t) {
  switch (t) {
    case ConvTile::automatic: return "automatic";
    case ConvTile::m64n128s2: return "64x128/2";
    case ConvTile::m64n128s3: return "64x128/3";
    case ConvTile::m128n128s3: return "128x128/3";
    case ConvTile::m256n128s3: return "256x128/3";
    case ConvTile::m128n256s3: return "128x256/3";
    case ConvTile::wgmma_m128n128s4: return "wgmma 128x128/4";
    case ConvTile::wgmma_m128n128s3: return "wgmma 128x128/3";
    case ConvTile::wgmma_m64n128s4: return "wgmma 64x128/4";
    case ConvTile::im2col_pool: return "im2col-pool";
  }
  return "?";
}

bool has_wgmma() {
  int dev = 0, major = 0, minor = 0;
  AE_CUDA_CHECK(cudaGetDevice(&dev));
  AE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  AE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0;
}

namespace {

// The kernels' parameter: a validated (std::invalid_argument otherwise), images > 0.
ConvK make_conv_k(const ConvArgs& a) {
  if (a.Cs < 8) throw std::invalid_argument("conv_igemm: channel pitch must be ≥ 8");
  if (a.Hs < 1 || a.Ws < 1)
    throw std::invalid_argument("conv_igemm: bad source size " + std::to_string(a.Hs) + "×" + std::to_string(a.Ws));
  ConvK k{};
  static_cast<ConvArgs&>(k) = a;
  k.lcs = ilog2_exact(a.Cs, "conv_igemm: channel pitch");
  k.gh = a.Hs;  // the row grid: the source's, but for down2_4x4
  k.gw = a.Ws;
  switch (a.shape) {
    case ConvShape::same3x3:
      k.taps = 9, k.ksz = 3, k.lksz = 0, k.lstride = 0, k.org = -1;
      break;
    case ConvShape::point1x1:
      k.taps = 1, k.ksz = 1, k.lksz = 0, k.lstride = 0, k.org = 0;
      break;
    case ConvShape::up2_parity:
      k.taps = 4, k.ksz = 2, k.lksz = 1, k.lstride = 0, k.org = -1, k.parity = 1;
      break;
    case ConvShape::down2_4x4:
      if (a.Hs % 2 != 0 || a.Ws % 2 != 0) throw std::invalid_argument("conv_igemm: down2_4x4 needs an even source");
      k.gh = a.Hs / 2, k.gw = a.Ws / 2;
      k.taps = 16, k.ksz = 4, k.lksz = 2, k.lstride = 1, k.org = -1;
      break;
    case ConvShape::up2_subpixel:
      if (a.epilogue != ConvEpilogue::store && a.epilogue != ConvEpilogue::loss)
        throw std::invalid_argument("conv_igemm: up2_subpixel takes the store or loss epilogue");
      if (4 * a.N > 16) throw std::invalid_argument("conv_igemm: up2_subpixel is for at most 4 output channels");
      k.taps = 9, k.ksz = 3, k.lksz = 0, k.lstride = 0, k.org = -1;
      k.sub_k = a.N;
      break;
  }
  const bool up2 = k.parity || k.sub_k;
  k.oh = up2 ? 2 * k.gh : k.gh;
  k.ow = up2 ? 2 * k.gw : k.gw;
  if (a.Kpad % 64 != 0 || a.Kpad < k.taps * a.Cs) throw std::invalid_argument("conv_igemm: Kpad must be a multiple of 64 ≥ taps·Cs");
  const int64_t M = int64_t(a.images) * k.gh * k.gw;
  if (M * (up2 ? 4 : 1) > (int64_t(1) << 30)) throw std::invalid_argument("conv_igemm: too many pixels");
  k.M = int(M);
  k.div_gw = FastDivmod(k.gw);
  k.div_ghw = FastDivmod(k.gh * k.gw);
  k.cols = k.sub_k ? 4 * a.N : a.N;  // up2_subpixel: all four parities' channels are columns
  const bool pool = a.epilogue == ConvEpilogue::pool;
  const bool masks = a.epilogue == ConvEpilogue::mask || a.epilogue == ConvEpilogue::unpool_mask;
  if ((pool || masks) && k.parity) throw std::invalid_argument("conv_igemm: this epilogue does not take up2_parity");
  if (pool && a.shape != ConvShape::same3x3 && a.shape != ConvShape::point1x1)
    throw std::invalid_argument("conv_igemm: pooling needs a same-size convolution");
  if (pool) {
    if (k.gh % 2 != 0 || k.gw % 2 != 0)
      throw std::invalid_argument("conv_igemm: the 2×2 pool needs an even output, got " + std::to_string(k.gh) + "×" +
                                  std::to_string(k.gw));
    k.div_qw = FastDivmod(k.gw / 2);
    k.div_qhw = FastDivmod((k.gh / 2) * (k.gw / 2));
  }
  if ((a.epilogue == ConvEpilogue::mask || a.epilogue == ConvEpilogue::unpool_mask) && (!a.aux || a.ld_aux < a.N))
    throw std::invalid_argument("conv_igemm: the mask epilogues need aux with ld_aux ≥ N");
  if (a.epilogue == ConvEpilogue::unpool_mask && !a.argmax_in)
    throw std::invalid_argument("conv_igemm: unpool_mask needs argmax_in");
  if (a.epilogue == ConvEpilogue::pool && !a.argmax_out) throw std::invalid_argument("conv_igemm: pool needs argmax_out");
  k.bias_vec = reinterpret_cast<uintptr_t>(a.bias) % 16 == 0 ? 1 : 0;
  if (k.ldo < a.N && !(a.epilogue == ConvEpilogue::loss && !a.out)) throw std::invalid_argument("conv_igemm: ldo < N");
  // The 8-channel epilogues (all but the sub-pixel store and the loss): 8-element groups of
  // out (and aux, argmax_in) start 16-byte aligned. Groups that straddle N (e.g. 100
  // channels at pitch 104 or 128) mask per element.
  if (!k.sub_k && a.epilogue != ConvEpilogue::loss && (a.ldo % 8 != 0 || (masks && a.ld_aux % 8 != 0)))
    throw std::invalid_argument("conv_igemm: the store, pool and mask epilogues need ldo and ld_aux multiples of 8");
  return k;
}

void dispatch(const ConvK& k, DType t, cudaStream_t stream) {
  if (t == DType::bf16)
    dispatch_epilogue<__nv_bfloat16>(k, stream);
  else
    dispatch_epilogue<float>(k, stream);
}

}  // namespace

void conv_igemm(const ConvArgs& a, DType t, cudaStream_t stream) {
  if (a.images <= 0) return;
  dispatch(make_conv_k(a), t, stream);
}

std::vector<ConvTile> conv_tile_candidates(const ConvArgs& a) {
  if (a.images <= 0 || a.epilogue == ConvEpilogue::loss) return {};
  const ConvK k = make_conv_k(a);
  if (has_fixed_kernel(k)) return {};
  std::vector<ConvTile> tiles = {ConvTile::m64n128s2, ConvTile::m64n128s3, ConvTile::m128n128s3, ConvTile::m256n128s3,
                                 ConvTile::m128n256s3};
  if (has_wgmma())
    tiles.insert(tiles.end(), {ConvTile::wgmma_m128n128s4, ConvTile::wgmma_m128n128s3, ConvTile::wgmma_m64n128s4});
  if (im2col_pool_fits(k)) tiles.push_back(ConvTile::im2col_pool);
  return tiles;
}

ConvTile tune_conv_tile(const ConvArgs& a, DType t, cudaStream_t stream) {
  const std::vector<ConvTile> tiles = conv_tile_candidates(a);
  if (tiles.empty()) return ConvTile::automatic;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  AE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) throw std::logic_error("tune_conv_tile: the stream is capturing");
  ConvK k = make_conv_k(a);
  const ConvTile rule = rule_tile(k, t == DType::bf16 ? 2 : 4);
  cudaEvent_t start = nullptr, stop = nullptr;
  AE_CUDA_CHECK(cudaEventCreate(&start));
  AE_CUDA_CHECK(cudaEventCreate(&stop));
  ConvTile best = rule;
  float best_ms = 0.f, rule_ms = 0.f;
  try {
    // One launch to warm up (a tile's first run loads its kernel), then the mean of five.
    for (ConvTile tile : tiles) {
      k.tile = tile;
      dispatch(k, t, stream);
      AE_CUDA_CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < 5; ++i) dispatch(k, t, stream);
      AE_CUDA_CHECK(cudaEventRecord(stop, stream));
      AE_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.f;
      AE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (tile == rule) rule_ms = ms;
      if (tile == tiles.front() || ms < best_ms) best = tile, best_ms = ms;
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  AE_CUDA_CHECK(cudaEventDestroy(start));
  AE_CUDA_CHECK(cudaEventDestroy(stop));
  // The rule's tile unless another is clearly faster: alone on the GPU a tile can win by
  // less than it loses beside the step's concurrent weight gradients (docs/GPU.md).
  return best_ms < 0.95f * rule_ms ? best : rule;
}

}  // namespace ae::cuda
