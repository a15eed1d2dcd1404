// The first encoder layer's forward as a kernel of its own (ConvTile::im2col_pool): the 1×1
// GEMM over the input's im2col, then bias, ReLU and the 2×2 max pool with its picks.
//
// This layer's reduction is one short row per pixel (9·C + 1 values), so the generic
// kernels (conv_igemm.cu, conv_wgmma.cu) spend it in a block's set-up, one load stage and
// the epilogue's trip through shared memory; with the next step's input built ahead, it
// was the longest kernel of the forward pass, which nothing overlaps, far from its memory
// floor (docs/BENCHMARKS.md, "The first layer's own kernel, the next batch's input, 128 steps
// per call").
// Here:
//  - blocks are persistent: each copies the layer's weights (all ldo columns) into shared
//    memory once and loops over tiles of 64 im2col rows, the tile after next copied while
//    this one is multiplied (three row buffers, one barrier per tile);
//  - a tile's rows are ordered so that each pool window lies in one thread's accumulators:
//    row 8·s + g of a warp's 32 rows is pixel s (row-major) of the warp's pool window g.
//    In mma.sync's m16n8 layout lane 4·g + t holds rows g, g + 8, g + 16 and g + 24 of a
//    32-row warp tile, i.e. the whole window, so the pool is register arithmetic; each
//    warp then writes its 8 windows' pooled values and picks through a small tile of
//    shared memory of its own, as whole 128-byte lines (from the registers they were
//    2- and 4-byte pieces, one 512-byte stride apart across a warp).
// The sums, the rounding and the picks are the generic kernels' (the first of the largest
// after the ReLU wins), bit for bit: tests/gpu/test_plan_gpu.cu compares every tile.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/conv_igemm.cuh"

namespace ae::cuda::igemm {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarpsM = 2, kWarpsN = 4, kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kTileRows = 32 * kWarpsM;  // im2col rows per tile: 16 pool windows
constexpr int kWindowsPerTile = kTileRows / 4;
constexpr int kBuffers = 3;              // A row buffers: the tile computed and two in flight
constexpr int kMaxRowBytes = 256;        // an im2col row: at most 64 fp32 values (C ≤ 7)

// Shared memory rows are padded by 16 bytes: an odd number of 16-byte units per row keeps
// ldmatrix's eight rows per phase on eight different bank groups, and the eight windows'
// rows of a warp's output tile on different banks for its 2- to 8-byte stores.
__host__ __device__ constexpr int smem_pitch(int row_bytes) { return row_bytes + 16; }
// A warp's output tile: 8 windows × its ldo/4 columns of values (element size `elem`) and
// of picks (bytes).
__host__ __device__ constexpr int out_tile_bytes(int ldo, int elem) {
  return 8 * (smem_pitch(ldo / kWarpsN * elem) + smem_pitch(ldo / kWarpsN));
}
constexpr int smem_bytes(int ldo, int row_bytes, int elem) {
  return (ldo + kBuffers * kTileRows) * smem_pitch(row_bytes) + kWarpsM * kWarpsN * out_tile_bytes(ldo, elem);
}

// At most 128 registers, so that two blocks share a multiprocessor (NI = 8 took 148
// unbounded). __maxnreg__ is CUDA 12.4's; an older nvcc builds the kernel unbounded.
#if __CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4)
#define AE_IM2COL_POOL_REGISTERS __maxnreg__(128)
#else
#define AE_IM2COL_POOL_REGISTERS __launch_bounds__(kThreads)
#endif

// NI: each warp's 8-column mma tiles; the block's columns are 4·8·NI = ldo.
template <typename T, int NI>
__global__ void AE_IM2COL_POOL_REGISTERS conv_im2col_pool_kernel(const ConvK p, int tiles) {
  constexpr int WN = 8 * NI, CH = 16 / int(sizeof(T)), E = int(sizeof(T));
  constexpr int VPITCH = smem_pitch(WN * E), PPITCH = smem_pitch(WN);  // the output tile's rows
  extern __shared__ __align__(128) unsigned char smem[];
  const int row_bytes = (1 << p.lcs) * int(sizeof(T)), pitch = smem_pitch(row_bytes);
  const int lcpr = p.lcs - (sizeof(T) == 2 ? 3 : 2);  // log2 of the 16-byte chunks per row
  const int ksteps = row_bytes / 32;                  // mma k-steps of 32 bytes (bf16 k16, tf32 k8)
  const uint32_t sb = smem_u32(smem), sa = sb + uint32_t(kWarpsN * WN * pitch);
  const uint32_t buf_bytes = uint32_t(kTileRows * pitch);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  unsigned char* tile_vals = smem + (kWarpsN * WN + kBuffers * kTileRows) * pitch + warp * out_tile_bytes(4 * WN, E);
  unsigned char* tile_picks = tile_vals + 8 * VPITCH;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const T* src = static_cast<const T*>(p.src);
  const T* wgt = static_cast<const T*>(p.weights);
  const int windows = p.M >> 2;

  // The weights: row n of B is output channel n's first row_bytes of its packed row
  // (the rest of Kpad is zero padding), zero past the real channels.
  for (int i = tid; i < (kWarpsN * WN) << lcpr; i += kThreads) {
    const int n = i >> lcpr, c = i & ((1 << lcpr) - 1);
    const bool ok = n < p.cols;
    cp_async16(sb + uint32_t(n * pitch + 16 * c), ok ? wgt + size_t(n) * p.Kpad + c * CH : wgt, ok);
  }
  cp_async_commit();
  // Tile `tile` into buffer `buf`: row r = 32·wm + 8·s + g is pixel s of window 16·tile + 8·wm + g.
  auto load_tile = [&](int tile, int buf) {
    for (int i = tid; i < kTileRows << lcpr; i += kThreads) {
      const int r = i >> lcpr, c = i & ((1 << lcpr) - 1);
      const int window = tile * kWindowsPerTile + (r >> 5) * 8 + (r & 7), s = (r >> 3) & 3;
      const bool ok = window < windows;
      const T* g = src;
      if (ok) {
        int img, rem, wy, wx;
        p.div_qhw.divmod(window, img, rem);
        p.div_qw.divmod(rem, wy, wx);
        const int pixel = (img * p.gh + 2 * wy + (s >> 1)) * p.gw + 2 * wx + (s & 1);
        g = src + (size_t(pixel) << p.lcs) + c * CH;
      }
      cp_async16(sa + uint32_t(buf) * buf_bytes + uint32_t(r * pitch + 16 * c), g, ok);
    }
  };

  // This thread's columns: n = wn·WN + 8·ni + 2·(lane % 4) + e.
  const int n0 = wn * WN + 2 * (lane & 3);
  float bias[NI][2];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = n0 + 8 * ni + e;
      bias[ni][e] = p.bias && n < p.cols ? p.bias[n] : 0.f;
    }
  const uint32_t a_ld = uint32_t((wm * 32 + (lane & 15)) * pitch + (lane >> 4) * 16);
  const uint32_t b_ld = sb + uint32_t((wn * WN + (lane & 7) + ((lane >> 4) << 3)) * pitch + ((lane >> 3) & 1) * 16);

  int tile = blockIdx.x;
  if (tile < tiles) load_tile(tile, 0);
  cp_async_commit();
  if (tile + int(gridDim.x) < tiles) load_tile(tile + gridDim.x, 1);
  cp_async_commit();
  for (int it = 0; tile < tiles; ++it, tile += gridDim.x) {
    cp_async_wait<1>();  // the weights and this tile (only the next tile's copy may be in flight)
    __syncthreads();     // everyone's copies; every warp is past the previous tile's ldmatrix
    const int ahead = tile + 2 * int(gridDim.x);
    if (ahead < tiles) load_tile(ahead, (it + 2) % kBuffers);  // the buffer of the tile before this one
    cp_async_commit();

    float acc[2][NI][4];
    zero_acc(acc);
    const uint32_t a_base = sa + uint32_t(it % kBuffers) * buf_bytes + a_ld;
#pragma unroll
    for (int ks = 0; ks < kMaxRowBytes / 32; ++ks) {
      if (ks >= ksteps) break;
      uint32_t af[2][4], bfr[NI][2];
      ldmatrix_x4(af[0], a_base + ks * 32);
      ldmatrix_x4(af[1], a_base + 16 * pitch + ks * 32);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, b_ld + nj * 16 * pitch + ks * 32);
        bfr[2 * nj][0] = r[0];
        bfr[2 * nj][1] = r[1];
        bfr[2 * nj + 1][0] = r[2];
        bfr[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) Mma<T>::mma(acc[mi][ni], af[mi], bfr[ni]);
    }

    // The pool: window pixel s is acc[s / 2][ni][2·(s % 2) + e] (rows g, g+8, g+16, g+24),
    // into the warp's output tile (row g, this thread's columns).
    const int g = lane >> 2, c0 = 2 * (lane & 3);
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      float best[2];
      uint32_t pick = 0;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        uint32_t a;
        best[e] = relu_pool4(acc[0][ni][e], acc[0][ni][2 + e], acc[1][ni][e], acc[1][ni][2 + e], bias[ni][e], a);
        pick |= a << (8 * e);
      }
      unsigned char* v = tile_vals + g * VPITCH + (8 * ni + c0) * E;
      if constexpr (sizeof(T) == 2)
        *reinterpret_cast<__nv_bfloat162*>(v) = __floats2bfloat162_rn(best[0], best[1]);
      else
        *reinterpret_cast<float2*>(v) = make_float2(round_tf32(best[0]), round_tf32(best[1]));
      *reinterpret_cast<uint16_t*>(tile_picks + g * PPITCH + 8 * ni + c0) = uint16_t(pick);
    }
    __syncwarp();
    // The tile's rows to windows w0..w0+7, columns wn·WN on: 16-byte pieces, a row's
    // consecutive pieces on consecutive lanes.
    const int w0 = tile * kWindowsPerTile + wm * 8;
    constexpr int VP = WN * E / 16, PP = WN / 16;  // 16-byte pieces per row
#pragma unroll
    for (int i = lane; i < 8 * VP; i += 32) {
      const int r = i / VP, c = i % VP;
      if (w0 + r < windows)
        *reinterpret_cast<uint4*>(static_cast<unsigned char*>(p.out) + (size_t(w0 + r) * p.ldo + wn * WN) * E + 16 * c) =
            *reinterpret_cast<const uint4*>(tile_vals + r * VPITCH + 16 * c);
    }
#pragma unroll
    for (int i = lane; i < 8 * PP; i += 32) {
      const int r = i / PP, c = i % PP;
      if (w0 + r < windows)
        *reinterpret_cast<uint4*>(p.argmax_out + size_t(w0 + r) * p.ldo + wn * WN + 16 * c) =
            *reinterpret_cast<const uint4*>(tile_picks + r * PPITCH + 16 * c);
    }
    __syncwarp();  // the tile is rewritten for the next window
  }
  cp_async_wait<0>();
}
#undef AE_IM2COL_POOL_REGISTERS

template <typename T, int NI>
void launch(const ConvK& k, cudaStream_t stream) {
  const int row_bytes = (1 << k.lcs) * int(sizeof(T));
  const int smem = smem_bytes(k.ldo, row_bytes, int(sizeof(T)));
  const int tiles = (k.M / 4 + kWindowsPerTile - 1) / kWindowsPerTile;
  // The most any layer of this NI takes: one request per kernel, not one per layer.
  allow_dynamic_smem(conv_im2col_pool_kernel<T, NI>, smem_bytes(8 * kWarpsN * NI, kMaxRowBytes, int(sizeof(T))));
  int per_sm = 0;
  AE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, conv_im2col_pool_kernel<T, NI>, kThreads, smem));
  const int blocks = std::min(tiles, std::max(per_sm, 1) * sm_count());
  conv_im2col_pool_kernel<T, NI><<<blocks, kThreads, smem, stream>>>(k, tiles);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace

bool im2col_pool_fits(const ConvK& k) {
  const int cs = 1 << k.lcs;
  return k.shape == ConvShape::point1x1 && k.epilogue == ConvEpilogue::pool && k.relu && !k.out_nchw && k.taps == 1 &&
         (k.ldo == 64 || k.ldo == 128 || k.ldo == 256) && k.cols <= k.ldo && cs >= 16 && cs <= 64;
}

template <typename T>
void launch_conv_im2col_pool(const ConvK& k, cudaStream_t stream) {
  if (!im2col_pool_fits(k)) throw std::invalid_argument("conv_igemm: the im2col-pool tile does not fit this layer");
  switch (k.ldo) {
    case 64: launch<T, 2>(k, stream); return;
    case 128: launch<T, 4>(k, stream); return;
    default: launch<T, 8>(k, stream); return;
  }
}
template void launch_conv_im2col_pool<bf16>(const ConvK&, cudaStream_t);
template void launch_conv_im2col_pool<float>(const ConvK&, cudaStream_t);

}  // namespace ae::cuda::igemm
