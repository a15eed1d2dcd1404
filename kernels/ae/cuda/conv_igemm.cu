// Implicit-GEMM convolution (conv_igemm, layers_cuda.cuh; docs/GPU.md): rows are output
// pixels, columns output channels, the reduction k = tap·Cs + c is gathered from the NHWC
// source on the fly, and the epilogue (bias, ReLU, pool, masks, unpool, loss) runs on the
// tile in shared memory. The GEMM engine itself is described in igemm.cu.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/fast_divmod.cuh"
#include "kernels/ae/cuda/igemm_common.cuh"
#include "kernels/ae/cuda/layers_cuda.cuh"
#include "kernels/ae/cuda/mma_ptx.cuh"

namespace ae::cuda {
namespace {

using namespace ptx;

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

// 8 consecutive values between global memory (bf16: one 16-byte access, fp32: two) or
// shared memory and registers.
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&v)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
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

template <int BM, int BN, int STAGES>
constexpr int conv_smem_bytes() {
  return std::max(STAGES * (BM + BN) * kRowPitch, BM * (BN + 4) * 4);
}

// Writes a warp's accumulators into an fp32 tile in shared memory (row pitch CLD) with the
// warp's sub-tile at (row0, col0): in the m16n8 layout lane l holds rows l/4 and l/4 + 8,
// columns 2·(l%4) and 2·(l%4) + 1 of each 16×8 tile.
template <int CLD, int MI, int NI>
__device__ __forceinline__ void store_acc_tile(float* ct, const float (&acc)[MI][NI][4], int row0, int col0, int lane) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int r = row0 + mi * 16 + (lane >> 2), c = col0 + ni * 8 + (lane & 3) * 2;
      ct[r * CLD + c] = acc[mi][ni][0];
      ct[r * CLD + c + 1] = acc[mi][ni][1];
      ct[(r + 8) * CLD + c] = acc[mi][ni][2];
      ct[(r + 8) * CLD + c + 1] = acc[mi][ni][3];
    }
}

// The epilogues, one functor per ConvEpilogue mode, a template parameter of the kernels
// chosen once at dispatch (dispatch_epilogue). Each finishes a BM×BN tile whose fp32
// accumulators are in shared memory (ct, row pitch BN + 4): every mode reads whole rows /
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
  constexpr int CLD = BN + 4, C8 = BN / 8;
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
    constexpr int CLD = BN + 4;
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

// 2×2 max pool of act(acc + bias) → out (H/2×W/2) + argmax; the tile's rows are in quad
// order (the four pixels of each 2×2 block consecutive).
struct PoolEpilogue {
  static constexpr bool kQuadRows = true;
  template <typename T, int BM, int BN, int NT>
  static __device__ __forceinline__ void run(const ConvK& p, const float* ct, int m0, int n0, int) {
    constexpr int CLD = BN + 4, C8 = BN / 8;
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
#pragma unroll
      for (int j = 0; j < 8; ++j) best[j] = -INFINITY;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        float v[8];
        lds8(ct + (4 * q + s) * CLD + c, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float x = v[j] + b[j];
          if (p.relu) x = fmaxf(x, 0.f);
          if (x > best[j] || isnan(x)) {
            best[j] = x;
            if (j < 4) arg_lo = (arg_lo & ~(0xffu << (8 * j))) | (uint32_t(s) << (8 * j));
            else arg_hi = (arg_hi & ~(0xffu << (8 * (j - 4)))) | (uint32_t(s) << (8 * (j - 4)));
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
    constexpr int CLD = BN + 4;
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

template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, typename Epilogue>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32) conv_igemm_kernel(const ConvK p) {
  constexpr int NT = WARPS_M * WARPS_N * 32;
  constexpr int KE = kRowBytes / int(sizeof(T));  // k elements per stage
  constexpr int CH = 16 / int(sizeof(T));         // elements per 16-byte chunk
  constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(MI >= 1 && NI >= 2 && NI % 2 == 0, "warp tile");
  static_assert(NT % kChunksPerRow == 0 && BM % (NT / kChunksPerRow) == 0, "A chunks per thread");
  constexpr int ROWS_PER_PASS = NT / kChunksPerRow;
  constexpr int A_IT = BM / ROWS_PER_PASS;
  constexpr int B_IT = (BN * kChunksPerRow + NT - 1) / NT;
  constexpr int A_STAGE = BM * kRowPitch, STAGE = (BM + BN) * kRowPitch;
  constexpr int CLD = BN + 4;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const T* src = static_cast<const T*>(p.src);
  const int par = p.parity ? int(blockIdx.z) : 0;  // output parity (dy,dx) = (par>>1, par&1)
  const T* wgt = static_cast<const T*>(p.weights) + size_t(par) * p.cols * p.Kpad;
  const int cmask = (1 << p.lcs) - 1;
  const int org_y = p.org + (par >> 1), org_x = p.org + (par & 1);

  // This thread copies chunk column a_chunk of A_IT rows of every A stage. Per row, once:
  // the source pixel index of tap (0,0) and which tap rows/columns fall inside the source
  // (bit ky, bit 8+kx), so that a stage costs an add and a bit test per row.
  const int a_chunk = tid % kChunksPerRow, a_row0 = tid / kChunksPerRow;
  int a_off[A_IT];
  uint32_t a_mask[A_IT];
#pragma unroll
  for (int i = 0; i < A_IT; ++i) {
    const int m = m0 + a_row0 + i * ROWS_PER_PASS;
    a_off[i] = 0;
    a_mask[i] = 0;
    if (m < p.M) {
      int img, y, x;
      decode_pixel(p, m, Epilogue::kQuadRows, img, y, x);
      const int yb = (y << p.lstride) + org_y, xb = (x << p.lstride) + org_x;
      for (int j = 0; j < p.ksz; ++j) {
        if (unsigned(yb + j) < unsigned(p.Hs)) a_mask[i] |= 1u << j;
        if (unsigned(xb + j) < unsigned(p.Ws)) a_mask[i] |= 1u << (8 + j);
      }
      a_off[i] = (img * p.Hs + yb) * p.Ws + xb;
    }
  }
  const uint32_t a_dst = uint32_t(a_row0 * kRowPitch + a_chunk * 16);
  // B rows: this thread's weight pointers, advanced by KE elements per stage.
  const T* b_ptr[B_IT];
  bool b_ok[B_IT];
#pragma unroll
  for (int i = 0; i < B_IT; ++i) {
    const int s = tid + i * NT, n = n0 + s / kChunksPerRow;
    b_ok[i] = s < BN * kChunksPerRow && n < p.cols;
    b_ptr[i] = b_ok[i] ? wgt + size_t(n) * p.Kpad + (s % kChunksPerRow) * CH : wgt;
  }

  auto load_stage = [&](int kt, uint32_t stage_addr) {
    const uint32_t sA = stage_addr, sB = stage_addr + A_STAGE;
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
      cp_async16(sA + a_dst + i * ROWS_PER_PASS * kRowPitch, g, ok);
    }
#pragma unroll
    for (int i = 0; i < B_IT; ++i) {
      const int s = tid + i * NT;
      if (B_IT * NT > BN * kChunksPerRow && s >= BN * kChunksPerRow) break;
      // The B chunk's column is the A chunk's (s % 8 == a_chunk): past the last tap the
      // packed weights are zero padding, so they are zero-filled instead of read (half of
      // the first layer's weight loads: 27 of its 64 columns are real).
      const bool ok = b_ok[i] && tap_ok;
      cp_async16(sB + (s / kChunksPerRow) * kRowPitch + (s % kChunksPerRow) * 16, ok ? b_ptr[i] + kt * KE : wgt, ok);
    }
  };

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
  const int KT = p.Kpad / KE;
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
// taps), and the nine taps become nine shifted ldmatrix row addresses into the halo.
constexpr int kHaloRows = 8, kHaloW = 16, kHaloPix = (kHaloRows + 2) * (kHaloW + 2);
constexpr int kHaloAStage = kHaloPix * kRowPitch, kHaloStage = kHaloAStage + 9 * 16 * kRowPitch;
constexpr int kHaloSmem = 2 * kHaloStage;

template <typename T, typename Epilogue>
__global__ void __launch_bounds__(128) subpixel_halo_kernel(const ConvK p) {
  constexpr int BM = kHaloRows * kHaloW, BN = 16, NT = 128, HC = kHaloW + 2;
  constexpr int CH = 16 / int(sizeof(T)), KE = kRowBytes / int(sizeof(T));
  constexpr int MI = 2, NI = 2;  // each of the 4 warps: 32 rows (two map rows) × 16 columns
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

  auto load_stage = [&](int kt, uint32_t st) {
    const int c0 = kt * KE;
    for (int i = tid; i < kHaloPix * kChunksPerRow; i += NT) {
      const int hp = i / kChunksPerRow, ch = i % kChunksPerRow;
      const int y = y0 - 1 + hp / HC, x = hp % HC - 1;
      const bool ok = unsigned(y) < unsigned(p.Hs) && unsigned(x) < unsigned(kHaloW);
      const T* g = ok ? src + ((size_t(img) * p.Hs + y) * kHaloW + x) * Cs + c0 + ch * CH : src;
      cp_async16(st + hp * kRowPitch + ch * 16, g, ok);
    }
    for (int i = tid; i < 9 * BN * kChunksPerRow; i += NT) {
      const int row = i / kChunksPerRow, ch = i % kChunksPerRow;  // row = tap·16 + n
      const int t = row / BN, n = row % BN;
      const bool ok = n < p.cols;
      const T* g = ok ? wgt + size_t(n) * p.Kpad + t * Cs + c0 + ch * CH : wgt;
      cp_async16(st + kHaloAStage + row * kRowPitch + ch * 16, g, ok);
    }
  };

  float acc[MI][NI][4];
  igemm::zero_acc(acc);

  // ldmatrix rows: GEMM row warp·32 + mi·16 + (lane & 15) is map pixel (2·warp + mi, lane & 15),
  // whose tap (ky,kx) sits at halo pixel (2·warp + mi + ky, (lane & 15) + kx).
  uint32_t a_ld[MI];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) a_ld[mi] = uint32_t(((2 * warp + mi) * HC + (lane & 15)) * kRowPitch + (lane >> 4) * 16);
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

  constexpr int CLD = BN + 4;
  float* ct = reinterpret_cast<float*>(smem);
  store_acc_tile<CLD>(ct, acc, warp * 32, 0, lane);
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
  conv_igemm_kernel<T, BM, BN, WM_, WN_, ST, Epilogue><<<grid, WM_ * WN_ * 32, smem, stream>>>(k);
  AE_CUDA_LAUNCH_CHECK();
}

// The epilogues that take the sub-pixel form (and so the halo kernel).
template <typename Epilogue>
constexpr bool kTakesSubpixel = std::is_same_v<Epilogue, SubpixelStoreEpilogue> || std::is_same_v<Epilogue, LossEpilogue>;

// The tile rule without timing (ConvTile::automatic).
ConvTile rule_tile(const ConvK& k, int elem_bytes) {
  // A reduction of one or two stages (the first encoder layer, the output layer's input
  // gradient): no pipeline to fill, the time goes to loads and the epilogue, so 64-row
  // blocks with two stages let more of them overlap. H100, batch 256, whole step: 1.305 ms
  // with the 128×128/3-stage tiles, 1.316 (128×128/2), 1.288 (64×128/2, taken), 1.348
  // (64×128/3), 1.346 (64×128, 4 warps/2) (docs/BENCHMARKS.md).
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
      subpixel_halo_kernel<T, Epilogue><<<unsigned(k.M / (kHaloRows * kHaloW)), 128, kHaloSmem, stream>>>(k);
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

template <typename T, typename Epilogue>
void allow_conv_smem() {
  if constexpr (kTakesSubpixel<Epilogue>)
    AE_CUDA_CHECK(cudaFuncSetAttribute(subpixel_halo_kernel<T, Epilogue>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kHaloSmem));
  const auto allow = [](auto kernel, int bytes) {
    AE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  };
  allow(conv_igemm_kernel<T, 128, 16, 4, 1, 3, Epilogue>, conv_smem_bytes<128, 16, 3>());
  allow(conv_igemm_kernel<T, 64, 128, 2, 4, 2, Epilogue>, conv_smem_bytes<64, 128, 2>());
  allow(conv_igemm_kernel<T, 64, 128, 2, 4, 3, Epilogue>, conv_smem_bytes<64, 128, 3>());
  allow(conv_igemm_kernel<T, 128, 128, 2, 4, 3, Epilogue>, conv_smem_bytes<128, 128, 3>());
  allow(conv_igemm_kernel<T, 256, 128, 4, 2, 3, Epilogue>, conv_smem_bytes<256, 128, 3>());
  allow(conv_igemm_kernel<T, 128, 256, 2, 4, 3, Epilogue>, conv_smem_bytes<128, 256, 3>());
}
template <typename T>
void allow_conv_smem_all() {
  allow_conv_smem<T, StoreEpilogue>();
  allow_conv_smem<T, SubpixelStoreEpilogue>();
  allow_conv_smem<T, PoolEpilogue>();
  allow_conv_smem<T, ReluMaskEpilogue>();
  allow_conv_smem<T, UnpoolMaskEpilogue>();
  allow_conv_smem<T, LossEpilogue>();
}

}  // namespace

namespace igemm {
void init_conv_kernels() {
  allow_conv_smem_all<__nv_bfloat16>();
  allow_conv_smem_all<float>();
}
}  // namespace igemm

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
  init_kernels();
  dispatch(make_conv_k(a), t, stream);
}

std::vector<ConvTile> conv_tile_candidates(const ConvArgs& a) {
  if (a.images <= 0 || a.epilogue == ConvEpilogue::loss || has_fixed_kernel(make_conv_k(a))) return {};
  return {ConvTile::m64n128s2, ConvTile::m64n128s3, ConvTile::m128n128s3, ConvTile::m256n128s3, ConvTile::m128n256s3};
}

ConvTile tune_conv_tile(const ConvArgs& a, DType t, cudaStream_t stream) {
  const std::vector<ConvTile> tiles = conv_tile_candidates(a);
  if (tiles.empty()) return ConvTile::automatic;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  AE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) throw std::logic_error("tune_conv_tile: the stream is capturing");
  init_kernels();
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
