// What the implicit-GEMM convolution's two engines share (conv_igemm.cu: mma.sync, any GPU
// from sm_80; conv_wgmma.cu: Hopper's warpgroup MMA): the kernel parameter, the loads of a
// stage's operands into shared memory, and the epilogues that finish a tile. Internal to
// kernels/ae/cuda; the entry points are in ops.cuh, the design in docs/GPU.md.
#pragma once
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/ae/cuda/fast_divmod.cuh"
#include "kernels/ae/cuda/igemm_common.cuh"
#include "kernels/ae/cuda/ops.cuh"
#include "kernels/ae/cuda/mma_ptx.cuh"

namespace ae::cuda::igemm {

using namespace ae::cuda::ptx;

// ---- convolution -------------------------------------------------------------------------
// The kernels' parameter: the caller's ConvArgs and what conv_igemm derives from them.
struct ConvK : ConvArgs {
  int lcs;               // source channel pitch 1<<lcs
  int gh, gw;            // the row grid (GEMM rows = images × gh × gw)
  FastDivmod div_gw, div_ghw;  // ÷gw, ÷(gh·gw): row → (image, y, x)
  FastDivmod div_qw, div_qhw;  // pool's quad order: ÷(gw/2), ÷(gh/2·gw/2)
  int M;
  int taps, ksz, lksz, lstride, org;  // tap t → (ky,kx) = (t/ksz, t%ksz); source pixel (y<<lstride)+ky+org
  int parity;            // up2_parity: blockIdx.z is the output parity, which shifts org and output
  int sub_k;             // up2_subpixel: output channels per parity (GEMM column n = parity·sub_k + k)
  int oh, ow;            // the output grid (pixels that store/loss write)
  int cols;              // GEMM columns: N (4·N for up2_subpixel)
  int bias_vec;          // bias is 16-byte aligned: 8 values load as vectors
};

__device__ __forceinline__ void lds8(const float* p, float (&v)[8]) { load8(p, v); }
__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {  // a GEMM operand: tf32-rounded
  *reinterpret_cast<float4*>(p) = make_float4(round_tf32(v[0]), round_tf32(v[1]), round_tf32(v[2]), round_tf32(v[3]));
  *reinterpret_cast<float4*>(p + 4) = make_float4(round_tf32(v[4]), round_tf32(v[5]), round_tf32(v[6]), round_tf32(v[7]));
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    w[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Row m of the GEMM → row-grid pixel. In quad order the four pixels of each 2×2 block are
// consecutive rows (the grid is even), so pooling happens inside one tile's epilogue.
__device__ __forceinline__ void decode_pixel(const ConvK& p, int m, bool quad, int& img, int& y, int& x) {
  int r;
  if (quad) {
    const int s = m & 3;
    int py, px;
    p.div_qhw.divmod(m >> 2, img, r);
    p.div_qw.divmod(r, py, px);
    y = 2 * py + (s >> 1);
    x = 2 * px + (s & 1);
  } else {
    p.div_ghw.divmod(m, img, r);
    p.div_gw.divmod(r, y, x);
  }
}

// The bias of output channels n..n+7, of which nv (≥ 8: all) are real; the rest read as 0.
__device__ __forceinline__ void bias8(const ConvK& p, int n, int nv, float (&b)[8]) {
  if (p.bias && nv >= 8 && p.bias_vec) {
    load8(p.bias + n, b);
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) b[j] = (p.bias && j < nv) ? p.bias[n + j] : 0.f;
}

// A stage brings 128 bytes of the reduction per tile row (64 bf16 / 32 fp32 values, four
// mma k-steps) into shared memory; rows are padded to 144 bytes, which keeps ldmatrix free
// of bank conflicts (9 16-byte units: eight consecutive rows hit eight different banks).
constexpr int kRowBytes = 128, kRowPitch = 144, kChunksPerRow = kRowBytes / 16;

// The row pitch (floats) of the epilogue's fp32 tile of BN columns. In the m16n8 layout a
// half-warp stores rows l/4 ∈ {0..3} × column pairs 2·(l%4): with a pitch ≡ 8 or 24 (mod 32)
// banks those four rows cover all 32 banks once, so each 8-byte store is one wavefront
// (BN + 4 made every 4-byte store two-way conflicted). Rows stay 16-byte aligned for lds8.
template <int BN>
constexpr int acc_tile_ld() {
  static_assert(BN % 16 == 0, "acc_tile_ld: BN a multiple of 16");
  return BN + 8;
}

template <int BM, int BN, int STAGES>
constexpr int conv_smem_bytes() {
  return std::max(STAGES * (BM + BN) * kRowPitch, BM * acc_tile_ld<BN>() * 4);
}

// Writes a warp's accumulators into an fp32 tile in shared memory (row pitch CLD) with the
// warp's sub-tile at (row0, col0): in the m16n8 layout lane l holds rows l/4 and l/4 + 8,
// columns 2·(l%4) and 2·(l%4) + 1 of each 16×8 tile (one 8-byte store per row).
template <int CLD, int MI, int NI>
__device__ __forceinline__ void store_acc_tile(float* ct, const float (&acc)[MI][NI][4], int row0, int col0, int lane) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int r = row0 + mi * 16 + (lane >> 2), c = col0 + ni * 8 + (lane & 3) * 2;
      *reinterpret_cast<float2*>(ct + r * CLD + c) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(ct + (r + 8) * CLD + c) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}

// The epilogues, one functor per ConvEpilogue mode, a template parameter of the kernels
// chosen once at dispatch (dispatch_epilogue). Each finishes a BM×BN tile whose fp32
// accumulators are in shared memory (ct, row pitch acc_tile_ld<BN>()): every mode reads whole rows /
// 2×2 blocks and writes channel-contiguous (coalesced) NHWC output, channels N..ldo−1 as
// zeros. par: the output parity (up2_parity), else 0. Columns n ≥ N of the tile are exact
// zeros (their weights were zero-filled), and they are never stored as such.
//
// Store, pool, mask and unpool_mask move 8 channels per item, 16-byte (bf16) / 32-byte
// (fp32) global accesses: conv_igemm checks before launch that their pitches (ldo, ld_aux)
// are multiples of 8. nv = N − n real channels in an item: ≥ 8 all of them (every item of
// the seed model), ≤ 0 none (channel padding, written as zeros). The sub-pixel store and
// the loss go element by element: their columns interleave the four output parities.

// fn(m, n, nv, v) for every 8-channel item of the tile's rows that lies inside the output
// (v: the item's accumulators).
template <int BM, int BN, int NT, typename Fn>
__device__ __forceinline__ void for_each_item8(const ConvK& p, const float* ct, int m0, int n0, Fn fn) {
  constexpr int CLD = acc_tile_ld<BN>(), C8 = BN / 8;
  for (int it = threadIdx.x; it < BM * C8; it += NT) {
    const int r = it / C8, c = (it % C8) * 8, m = m0 + r, n = n0 + c;
    if (m >= p.M || n >= p.ldo) continue;
    const int nv = p.cols - n;
    float v[8];
    lds8(ct + r * CLD + c, v);
    fn(m, n, nv, v);
  }
}

// out[pixel][n] = act(acc + bias); the pixel is (2y+oy, 2x+ox) of row pixel (y,x) with
// up2_parity, else (y,x).
struct StoreEpilogue {
  static constexpr bool kQuadRows = false;
  template <typename T, int BM, int BN, int NT>
  static __device__ __forceinline__ void run(const ConvK& p, const float* ct, int m0, int n0, int par) {
    const int oy = p.parity ? (par >> 1) : 0, ox = p.parity ? (par & 1) : 0;
    T* out = static_cast<T*>(p.out);
    for_each_item8<BM, BN, NT>(p, ct, m0, n0, [&](int m, int n, int nv, float(&v)[8]) {
      float b[8];
      bias8(p, n, nv, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float x = v[j] + b[j];
        if (p.relu) x = fmaxf(x, 0.f);
        v[j] = j < nv ? x : 0.f;
      }
      size_t opix = size_t(m);
      if (p.parity) {
        int img, y, x;
        decode_pixel(p, m, false, img, y, x);
        opix = (size_t(img) * p.oh + 2 * y + oy) * p.ow + 2 * x + ox;
      }
      store8(out + opix * p.ldo + n, v);
    });
  }
};

// up2_subpixel's store: column n is channel n % sub_k of output parity n / sub_k.
struct SubpixelStoreEpilogue {
  static constexpr bool kQuadRows = false;
  template <typename T, int BM, int BN, int NT>
  static __device__ __forceinline__ void run(const ConvK& p, const float* ct, int m0, int n0, int) {
    constexpr int CLD = acc_tile_ld<BN>();
    T* out = static_cast<T*>(p.out);
    for (int it = threadIdx.x; it < BM * BN; it += NT) {
      const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
      if (m >= p.M || n >= p.cols) continue;
      const int q = n / p.sub_k, ch = n - q * p.sub_k;
      float v = ct[r * CLD + c] + (p.bias ? p.bias[ch] : 0.f);
      if (p.relu) v = fmaxf(v, 0.f);
      int img, y, x;
      decode_pixel(p, m, false, img, y, x);
      const size_t opix = (size_t(img) * p.oh + 2 * y + (q >> 1)) * p.ow + 2 * x + (q & 1);
      store_f(out + opix * p.ldo + ch, v);
      if (ch == p.sub_k - 1)
        for (int j = p.sub_k; j < p.ldo; ++j) store_f(out + opix * p.ldo + j, 0.f);
    }
  }
};

// One 2×2 window of the pool after bias and ReLU: v0..v3 the window's accumulators in
// row-major order. After fmaxf no value is NaN, so the first of the largest wins with
// compares and selects (fewer instructions than the general loop's NaN test and byte
// insertion; the first layer's forward is bound by their issue). Returns the pooled value,
// its pixel (0..3) in `pick`. PoolEpilogue and conv_im2col_pool.cu pool through it.
__device__ __forceinline__ float relu_pool4(float v0, float v1, float v2, float v3, float b, uint32_t& pick) {
  const float v[4] = {v0, v1, v2, v3};
  float m = fmaxf(v[0] + b, 0.f);
  pick = 0;
#pragma unroll
  for (int s = 1; s < 4; ++s) {
    const float x = fmaxf(v[s] + b, 0.f);
    const bool larger = x > m;
    m = larger ? x : m;
    pick = larger ? uint32_t(s) : pick;
  }
  return m;
}

// 2×2 max pool of act(acc + bias) → out (H/2×W/2) + argmax; the tile's rows are in quad
// order (the four pixels of each 2×2 block consecutive).
struct PoolEpilogue {
  static constexpr bool kQuadRows = true;
  template <typename T, int BM, int BN, int NT>
  static __device__ __forceinline__ void run(const ConvK& p, const float* ct, int m0, int n0, int) {
    constexpr int CLD = acc_tile_ld<BN>(), C8 = BN / 8;
    T* out = static_cast<T*>(p.out);
    const int plane = p.div_qhw.d;  // pooled pixels per image
    for (int it = threadIdx.x; it < (BM / 4) * C8; it += NT) {
      const int q = it / C8, c = (it % C8) * 8, m = m0 + 4 * q, n = n0 + c;
      if (m >= p.M || n >= p.ldo) continue;
      const int nv = p.cols - n;
      const size_t low = size_t(m >> 2);
      float best[8], b[8];
      uint32_t arg_lo = 0, arg_hi = 0;
      bias8(p, n, nv, b);
      if (p.relu) {  // the same values and picks as the general loop below
        float v[4][8];
#pragma unroll
        for (int s = 0; s < 4; ++s) lds8(ct + (4 * q + s) * CLD + c, v[s]);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          uint32_t a;
          best[j] = relu_pool4(v[0][j], v[1][j], v[2][j], v[3][j], b[j], a);
          if (j < 4) arg_lo |= a << (8 * j);
          else arg_hi |= a << (8 * (j - 4));
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) best[j] = -INFINITY;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          float v[8];
          lds8(ct + (4 * q + s) * CLD + c, v);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float x = v[j] + b[j];
            if (x > best[j] || isnan(x)) {
              best[j] = x;
              if (j < 4) arg_lo = (arg_lo & ~(0xffu << (8 * j))) | (uint32_t(s) << (8 * j));
              else arg_hi = (arg_hi & ~(0xffu << (8 * (j - 4)))) | (uint32_t(s) << (8 * (j - 4)));
            }
          }
        }
      }
      if (nv < 8) {  // padding channels: value 0, pick 0
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (j >= nv) {
            best[j] = 0.f;
            if (j < 4) arg_lo &= ~(0xffu << (8 * j));
            else arg_hi &= ~(0xffu << (8 * (j - 4)));
          }
      }
      store8(out + low * p.ldo + n, best);
      *reinterpret_cast<uint2*>(p.argmax_out + low * p.ldo + n) = make_uint2(arg_lo, arg_hi);
      if (p.out_nchw && nv > 0) {
        int img, rem;
        p.div_qhw.divmod(int(low), img, rem);
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (j < nv) p.out_nchw[(size_t(img) * p.N + n + j) * plane + rem] = best[j];
      }
    }
  }
};

// Backward through a ReLU: out = acc × (aux > 0), aux at the same pixel. UNPOOL: backward
// of "conv then ReLU then pool", the masked value routed to the argmax position of each 2×2
// block of the 2H×2W output, zeros elsewhere.
template <bool UNPOOL>
struct MaskEpilogue {
  static constexpr bool kQuadRows = false;
  template <typename T, int BM, int BN, int NT>
  static __device__ __forceinline__ void run(const ConvK& p, const float* ct, int m0, int n0, int) {
    T* out = static_cast<T*>(p.out);
    const T* aux = static_cast<const T*>(p.aux);
    for_each_item8<BM, BN, NT>(p, ct, m0, n0, [&](int m, int n, int nv, float(&v)[8]) {
      float a[8];
      uint2 am = make_uint2(0u, 0u);
      const size_t ai = size_t(m) * p.ld_aux + n;
      if (nv >= 8) {
        load8(aux + ai, a);
        if constexpr (UNPOOL) am = *reinterpret_cast<const uint2*>(p.argmax_in + ai);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          a[j] = j < nv ? load_f(aux + ai + j) : 0.f;
          if constexpr (UNPOOL) {
            const uint32_t pick = j < nv ? uint32_t(p.argmax_in[ai + j]) : 0u;
            if (j < 4) am.x |= pick << (8 * j);
            else am.y |= pick << (8 * (j - 4));
          }
        }
      }
      if constexpr (!UNPOOL) {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = a[j] > 0.f ? v[j] : 0.f;  // padding: a = 0
        store8(out + size_t(m) * p.ldo + n, v);
      } else {
        int img, y, x;
        decode_pixel(p, m, false, img, y, x);
        const size_t W2 = size_t(p.gw) * 2;
        const size_t base = ((size_t(img) * p.gh * 2 + 2 * y) * W2 + 2 * x) * p.ldo + n;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          float o[8];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const uint32_t word = j < 4 ? am.x : am.y;
            const int arg = int((word >> (8 * (j & 3))) & 0xffu);
            o[j] = (a[j] > 0.f && arg == s) ? v[j] : 0.f;
          }
          store8(out + base + ((s >> 1) * W2 + (s & 1)) * p.ldo, o);
        }
      }
    });
  }
};
using ReluMaskEpilogue = MaskEpilogue<false>;
using UnpoolMaskEpilogue = MaskEpilogue<true>;

// MSE against the uint8 input: Σ(out − x/255)² into loss_sum, the gradient
// grad_scale·(out − x/255) into out (when out is set), the output into out_nchw (when set).
struct LossEpilogue {
  static constexpr bool kQuadRows = false;
  template <typename T, int BM, int BN, int NT>
  static __device__ __forceinline__ void run(const ConvK& p, const float* ct, int m0, int n0, int par) {
    constexpr int CLD = acc_tile_ld<BN>();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int oy = p.parity ? (par >> 1) : 0, ox = p.parity ? (par & 1) : 0;
    T* out = static_cast<T*>(p.out);
    __shared__ float red[32];
    const int ohw = p.oh * p.ow;
    const int pos0 = p.order_pos ? *p.order_pos : 0;
    float local = 0.f;
    // Channels of the image; up2_subpixel: column n is channel n % sub_k of parity n / sub_k.
    const int C = p.sub_k ? p.sub_k : p.cols;
    const int cols = (out && !p.sub_k) ? p.ldo : p.cols;
    for (int it = tid; it < BM * BN; it += NT) {
      const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
      if (m >= p.M || n >= cols) continue;
      int img, y, x;
      decode_pixel(p, m, false, img, y, x);
      int ch = n, Y = y, X = x;
      if (p.sub_k) {
        const int q = n / p.sub_k;
        ch = n - q * p.sub_k;
        Y = 2 * y + (q >> 1);
        X = 2 * x + (q & 1);
      } else if (p.parity) {
        Y = 2 * y + oy;
        X = 2 * x + ox;
      }
      const int pix = Y * p.ow + X;
      const size_t opix = size_t(img) * ohw + pix;
      if (n >= p.cols) {
        store_f(out + opix * p.ldo + n, 0.f);
        continue;
      }
      if (out && p.sub_k && ch == C - 1)
        for (int j = C; j < p.ldo; ++j) store_f(out + opix * p.ldo + j, 0.f);
      const float v = ct[r * CLD + c] + (p.bias ? p.bias[ch] : 0.f);
      const int idx = p.order ? p.order[pos0 + img] : img;
      const float target = float(p.images_u8[(size_t(idx) * C + ch) * ohw + pix]) * (1.f / 255.f);
      const float d = v - target;
      local += d * d;
      if (out) store_f(out + opix * p.ldo + ch, d * p.grad_scale);
      if (p.out_nchw) p.out_nchw[(size_t(img) * C + ch) * ohw + pix] = v;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(0xffffffffu, local, o);
    if (lane == 0) red[warp] = local;
    __syncthreads();
    if (warp == 0) {
      local = lane < NT / 32 ? red[lane] : 0.f;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(0xffffffffu, local, o);
      if (lane == 0 && p.loss_sum) atomicAdd(p.loss_sum, double(local));
    }
  }
};


// ---- the mainloop's loads ----------------------------------------------------------------
// Every stage brings kRowBytes of the reduction for each of the tile's BM rows (A: gathered
// from the NHWC source, tap by tap) and BN columns (B: the packed weights) into shared
// memory with cp.async, 16-byte chunk j of a row at row·PITCH + 16·j, or with SWIZZLE at
// row·128 + 16·(j ^ row % 8): the 128-byte swizzle that Hopper's warpgroup MMA reads
// (rows of 8 × 128 bytes, 1024-byte aligned). A thread moves chunk column tid % 8 of a
// fixed set of rows, so per row it decodes the pixel once; a stage then costs an add and
// a bit test per row.
template <typename T, int BM, int BN, int NT, int PITCH, bool SWIZZLE, bool QUAD>
struct ConvStageLoader {
  static constexpr int KE = kRowBytes / int(sizeof(T));  // k elements per stage
  static constexpr int CH = 16 / int(sizeof(T));         // elements per 16-byte chunk
  static constexpr int ROWS_PER_PASS = NT / kChunksPerRow;
  static constexpr int A_IT = BM / ROWS_PER_PASS;
  static constexpr int B_IT = (BN * kChunksPerRow + NT - 1) / NT;
  static constexpr int A_BYTES = BM * PITCH;  // where B starts in a stage
  static constexpr int STAGE_BYTES = (BM + BN) * PITCH;
  static_assert(NT % kChunksPerRow == 0 && BM % ROWS_PER_PASS == 0, "A chunks per thread");
  static_assert(!SWIZZLE || (PITCH == kRowBytes && ROWS_PER_PASS % 8 == 0), "swizzled rows");

  const T* src;
  const T* wgt;
  int a_chunk, cmask;
  int a_off[A_IT];       // source pixel index of tap (0,0) of each of this thread's A rows
  uint32_t a_mask[A_IT]; // which tap rows (bit ky) and columns (bit 8+kx) fall inside the source
  uint32_t a_dst, b_dst; // this thread's first A / B chunk in a stage
  const T* b_ptr[B_IT];
  bool b_ok[B_IT];

  // The byte offset of chunk j of row r in a stage's A or B block.
  static __device__ __forceinline__ uint32_t chunk_offset(int r, int j) {
    return uint32_t(r * PITCH + 16 * (SWIZZLE ? (j ^ (r & 7)) : j));
  }

  __device__ __forceinline__ ConvStageLoader(const ConvK& p, int m0, int n0, int par) {
    const int tid = threadIdx.x;
    src = static_cast<const T*>(p.src);
    wgt = static_cast<const T*>(p.weights) + size_t(par) * p.cols * p.Kpad;
    cmask = (1 << p.lcs) - 1;
    const int org_y = p.org + (par >> 1), org_x = p.org + (par & 1);
    a_chunk = tid % kChunksPerRow;
    const int a_row0 = tid / kChunksPerRow;
#pragma unroll
    for (int i = 0; i < A_IT; ++i) {
      const int m = m0 + a_row0 + i * ROWS_PER_PASS;
      a_off[i] = 0;
      a_mask[i] = 0;
      if (m < p.M) {
        int img, y, x;
        decode_pixel(p, m, QUAD, img, y, x);
        const int yb = (y << p.lstride) + org_y, xb = (x << p.lstride) + org_x;
        for (int j = 0; j < p.ksz; ++j) {
          if (unsigned(yb + j) < unsigned(p.Hs)) a_mask[i] |= 1u << j;
          if (unsigned(xb + j) < unsigned(p.Ws)) a_mask[i] |= 1u << (8 + j);
        }
        a_off[i] = (img * p.Hs + yb) * p.Ws + xb;
      }
    }
    // Rows a_row0 + i·ROWS_PER_PASS (and B rows tid/8 + i·NT/8) share their row % 8.
    a_dst = chunk_offset(a_row0, a_chunk);
    b_dst = uint32_t(A_BYTES) + chunk_offset(tid / kChunksPerRow, a_chunk);
#pragma unroll
    for (int i = 0; i < B_IT; ++i) {
      const int s = tid + i * NT, n = n0 + s / kChunksPerRow;
      b_ok[i] = s < BN * kChunksPerRow && n < p.cols;
      b_ptr[i] = b_ok[i] ? wgt + size_t(n) * p.Kpad + a_chunk * CH : wgt;
    }
  }

  // Stage kt of the reduction into the stage at shared address `stage`.
  __device__ __forceinline__ void load(const ConvK& p, int kt, uint32_t stage) const {
    const int k = kt * KE + a_chunk * CH;
    const int t = k >> p.lcs, c = k & cmask;
    int ky, kx;
    if (p.ksz == 3) {
      ky = (t * 11) >> 5;  // t / 3 for t < 9
      kx = t - 3 * ky;
    } else {
      ky = t >> p.lksz;
      kx = t & (p.ksz - 1);
    }
    const bool tap_ok = t < p.taps;
    const int tap_off = ky * p.Ws + kx;
    const uint32_t tap_bits = (1u << ky) | (1u << (8 + kx));
#pragma unroll
    for (int i = 0; i < A_IT; ++i) {
      const bool ok = tap_ok && (a_mask[i] & tap_bits) == tap_bits;
      const T* g = ok ? src + ((size_t(a_off[i] + tap_off) << p.lcs) + c) : src;
      cp_async16(stage + a_dst + i * ROWS_PER_PASS * PITCH, g, ok);
    }
#pragma unroll
    for (int i = 0; i < B_IT; ++i) {
      if (B_IT * NT > BN * kChunksPerRow && int(threadIdx.x) + i * NT >= BN * kChunksPerRow) break;
      // The B chunk's column is the A chunk's: past the last tap the packed weights are
      // zero padding, so they are zero-filled instead of read (half of the first layer's
      // weight loads: 27 of its 64 columns are real).
      const bool ok = b_ok[i] && tap_ok;
      cp_async16(stage + b_dst + i * (NT / kChunksPerRow) * PITCH, ok ? b_ptr[i] + kt * KE : wgt, ok);
    }
  }
};

// The first layer's kernel (conv_im2col_pool.cu): a 1×1 convolution over an im2col of at
// most 64 columns, with the pool epilogue after a ReLU, into 64, 128 or 256 channels.
bool im2col_pool_fits(const ConvK& k);
template <typename T>
void launch_conv_im2col_pool(const ConvK& k, cudaStream_t stream);

// The wgmma engine's launch (conv_wgmma.cu, compiled for sm_90a only): tile is one of the
// ConvTile::wgmma_* tiles. Instantiated there for every element type and epilogue.
template <typename T, typename Epilogue>
void launch_conv_wgmma(ConvTile tile, const ConvK& k, cudaStream_t stream);

}  // namespace ae::cuda::igemm
