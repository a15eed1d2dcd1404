// Implicit-GEMM convolution and weight-gradient kernels (see layers_cuda.cuh, docs/GPU.md).
//
// Both kernels are classic multistage tensor-core GEMMs: a block computes a BM×BN tile,
// its warps WM×WN sub-tiles; each stage brings 64 bytes of the reduction per tile row into
// shared memory with cp.async (zero-fill for padding and out-of-image taps), three stages
// in flight; fragments come out of shared memory with ldmatrix and feed mma.sync (bf16
// m16n8k16 or tf32 m16n8k8, fp32 accumulators). What makes them convolutions is only
// the address computation of each 16-byte chunk: an im2col matrix is never written.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/layers_cuda.cuh"
#include "kernels/ae/cuda/mma_ptx.cuh"

namespace ae::cuda {

int ilog2_exact(int v, const char* what) {
  int l = 0;
  while ((1 << l) < v) ++l;
  if (v <= 0 || (1 << l) != v) throw std::invalid_argument(std::string(what) + " must be a power of two, got " + std::to_string(v));
  return l;
}

namespace {

using bf16 = __nv_bfloat16;
using namespace ptx;

int sm_count() {
  static int n = [] {
    int dev = 0, v = 0;
    AE_CUDA_CHECK(cudaGetDevice(&dev));
    AE_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

// ---- convolution -------------------------------------------------------------------------
struct ConvK {
  const void* src;
  int Hs, Ws, lcs, lup;  // source NHWC, channel pitch 1<<lcs, seen upsampled by 1<<lup
  int lh, lw;            // log2 of the row grid (GEMM rows = images × grid pixels)
  int M;
  int taps, ksz, lksz, lstride, org;  // tap t → (ky,kx) = (t/ksz, t%ksz); source pixel (y<<lstride)+ky+org
  int parity;            // up2_parity: blockIdx.z is the output parity, which shifts org and output
  int sub_k;             // up2_subpixel: output channels per parity (GEMM column n = parity·sub_k + k)
  int loh, low;          // log2 of the output grid (pixels that store/loss write)
  int Kpad;
  const void* wgt;
  int N;
  int epi, quad, relu, vec;
  const float* bias;
  void* out;
  int ldo;
  uint8_t* argmax_out;
  const void* aux;
  int ld_aux;
  const uint8_t* argmax_in;
  float* out_nchw;
  const uint8_t* images;
  const int* order;
  const int* order_pos;
  float grad_scale;
  double* loss_sum;
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

// Row m of the GEMM → output pixel. In quad order the four pixels of each 2×2 block are
// consecutive rows, so pooling (and the 2×2 sum of the upsample backward) happens inside
// one tile's epilogue.
__device__ __forceinline__ void decode_pixel(int m, bool quad, int lh, int lw, int& img, int& y, int& x) {
  if (quad) {
    const int q = m >> 2, s = m & 3, lhl = lh - 1, lwl = lw - 1;
    img = q >> (lhl + lwl);
    y = (((q >> lwl) & ((1 << lhl) - 1)) << 1) | (s >> 1);
    x = ((q & ((1 << lwl) - 1)) << 1) | (s & 1);
  } else {
    img = m >> (lh + lw);
    y = (m >> lw) & ((1 << lh) - 1);
    x = m & ((1 << lw) - 1);
  }
}

// A stage brings 128 bytes of the reduction per tile row (64 bf16 / 32 fp32 values, four
// mma k-steps) into shared memory; rows are padded to 144 bytes, which keeps ldmatrix free
// of bank conflicts (9 16-byte units: eight consecutive rows hit eight different banks).
constexpr int kRowBytes = 128, kRowPitch = 144, kChunksPerRow = kRowBytes / 16;

template <int BM, int BN, int STAGES>
constexpr int conv_smem_bytes() {
  return std::max(STAGES * (BM + BN) * kRowPitch, BM * (BN + 4) * 4);
}

// A warp's fp32 accumulators: MI×NI mma tiles of 16×8, four values per lane each.
template <int MI, int NI>
__device__ __forceinline__ void zero_acc(float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
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

// The epilogue of a BM×BN tile whose fp32 accumulators are in shared memory (ct, row
// pitch BN + 4): every mode reads whole rows / 2×2 blocks and writes channel-contiguous
// (coalesced) NHWC output. par: the output parity (up2_parity), else 0.
template <typename T, int BM, int BN, int NT>
__device__ __forceinline__ void conv_epilogue(const ConvK& p, const float* ct, int m0, int n0, int par) {
  constexpr int CLD = BN + 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int H = 1 << p.lh, W = 1 << p.lw;
  const int oy = p.parity ? (par >> 1) : 0, ox = p.parity ? (par & 1) : 0;
  T* out = static_cast<T*>(p.out);
  const T* aux = static_cast<const T*>(p.aux);
  // Vector path: 8 channels per item, 16-byte (bf16) / 32-byte (fp32) global accesses.
  if (p.vec && p.epi <= 3) {
    constexpr int C8 = BN / 8;
    const int ls = p.parity ? 1 : 0;
    if (p.epi == 1) {  // 2×2 max pool of relu(acc + bias); rows in quad order
      const int lq = p.lh + p.lw - 2;
      for (int it = tid; it < (BM / 4) * C8; it += NT) {
        const int q = it / C8, c = (it % C8) * 8, m = m0 + 4 * q, n = n0 + c;
        if (m >= p.M || n >= p.N) continue;
        float best[8], b[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        uint32_t arg_lo = 0, arg_hi = 0;
        if (p.bias) load8(p.bias + n, b);
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
        const size_t low = size_t(m >> 2);
        store8(out + low * p.ldo + n, best);
        *reinterpret_cast<uint2*>(p.argmax_out + low * p.ldo + n) = make_uint2(arg_lo, arg_hi);
        if (p.out_nchw) {
          const int img = int(low >> lq), rem = int(low & ((size_t(1) << lq) - 1));
#pragma unroll
          for (int j = 0; j < 8; ++j) p.out_nchw[((size_t(img) * p.N + n + j) << lq) + rem] = best[j];
        }
      }
    } else {
      for (int it = tid; it < BM * C8; it += NT) {
        const int r = it / C8, c = (it % C8) * 8, m = m0 + r, n = n0 + c;
        if (m >= p.M || n >= p.ldo) continue;
        float v[8];
        lds8(ct + r * CLD + c, v);
        if (p.epi == 0) {  // store
          if (n < p.N) {
            if (p.bias) {
              float b[8];
              load8(p.bias + n, b);
#pragma unroll
              for (int j = 0; j < 8; ++j) v[j] += b[j];
            }
            if (p.relu)
#pragma unroll
              for (int j = 0; j < 8; ++j) v[j] = fmaxf(v[j], 0.f);
          } else {
#pragma unroll
            for (int j = 0; j < 8; ++j) v[j] = 0.f;
          }
          size_t opix = size_t(m);
          if (ls) {
            int img, y, x;
            decode_pixel(m, false, p.lh, p.lw, img, y, x);
            opix = ((size_t(img) << p.loh) + ((y << 1) + oy)) * (size_t(1) << p.low) + (x << 1) + ox;
          }
          store8(out + opix * p.ldo + n, v);
        } else if (p.epi == 2) {  // × ReLU mask
          if (n >= p.N) continue;
          float a[8];
          load8(aux + size_t(m) * p.ld_aux + n, a);
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] = a[j] > 0.f ? v[j] : 0.f;
          store8(out + size_t(m) * p.ldo + n, v);
        } else {  // unpool: × ReLU mask, to the argmax position of each 2×2 block
          if (n >= p.N) continue;
          float a[8];
          const size_t ai = size_t(m) * p.ld_aux + n;
          load8(aux + ai, a);
          const uint2 am = *reinterpret_cast<const uint2*>(p.argmax_in + ai);
          int img, y, x;
          decode_pixel(m, false, p.lh, p.lw, img, y, x);
          const size_t W2 = size_t(W) * 2;
          const size_t base = ((size_t(img) * H * 2 + 2 * y) * W2 + 2 * x) * p.ldo + n;
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
      }
    }
    return;
  }

  switch (p.epi) {
    case 0: {  // store: out at output pixel (y<<ostride)+oy, (x<<ostride)+ox of the row pixel
      const int ls = p.parity ? 1 : 0;
      if (p.sub_k) {  // up2_subpixel: column n is channel n % sub_k of output parity n / sub_k
        for (int it = tid; it < BM * BN; it += NT) {
          const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
          if (m >= p.M || n >= p.N) continue;
          const int q = n / p.sub_k, ch = n - q * p.sub_k;
          float v = ct[r * CLD + c] + (p.bias ? p.bias[ch] : 0.f);
          if (p.relu) v = fmaxf(v, 0.f);
          int img, y, x;
          decode_pixel(m, false, p.lh, p.lw, img, y, x);
          const size_t opix = ((size_t(img) << p.loh) + ((y << 1) + (q >> 1))) * (size_t(1) << p.low) + (x << 1) + (q & 1);
          store_f(out + opix * p.ldo + ch, v);
          if (ch == p.sub_k - 1)
            for (int j = p.sub_k; j < p.ldo; ++j) store_f(out + opix * p.ldo + j, 0.f);
        }
        break;
      }
      for (int it = tid; it < BM * BN; it += NT) {
        const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
        if (m >= p.M || n >= p.ldo) continue;
        float v = 0.f;
        if (n < p.N) {
          v = ct[r * CLD + c] + (p.bias ? p.bias[n] : 0.f);
          if (p.relu) v = fmaxf(v, 0.f);
        }
        size_t opix = size_t(m);
        if (ls) {
          int img, y, x;
          decode_pixel(m, false, p.lh, p.lw, img, y, x);
          opix = ((size_t(img) << p.loh) + ((y << 1) + oy)) * (size_t(1) << p.low) + (x << 1) + ox;
        }
        store_f(out + opix * p.ldo + n, v);
      }
      break;
    }
    case 1: {  // 2×2 max pool of relu(acc + bias); rows are in quad order
      const int lq = p.lh + p.lw - 2;  // log2 pooled pixels per image
      for (int it = tid; it < (BM / 4) * BN; it += NT) {
        const int q = it / BN, c = it % BN, m = m0 + 4 * q, n = n0 + c;
        if (m >= p.M || n >= p.N) continue;
        const float b = p.bias ? p.bias[n] : 0.f;
        float best = -INFINITY;
        int arg = 0;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          float v = ct[(4 * q + s) * CLD + c] + b;
          if (p.relu) v = fmaxf(v, 0.f);
          if (v > best || isnan(v)) best = v, arg = s;
        }
        const int low = m >> 2;
        store_f(out + size_t(low) * p.ldo + n, best);
        p.argmax_out[size_t(low) * p.ldo + n] = uint8_t(arg);
        if (p.out_nchw) {
          const int img = low >> lq, rem = low & ((1 << lq) - 1);
          p.out_nchw[((size_t(img) * p.N + n) << lq) + rem] = best;
        }
      }
      break;
    }
    case 2: {  // backward through a ReLU: acc × (aux > 0), same pixel
      for (int it = tid; it < BM * BN; it += NT) {
        const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
        if (m >= p.M || n >= p.N) continue;
        const bool alive = load_f(aux + size_t(m) * p.ld_aux + n) > 0.f;
        store_f(out + size_t(m) * p.ldo + n, alive ? ct[r * CLD + c] : 0.f);
      }
      break;
    }
    case 3: {  // unpool: acc × ReLU mask, to the argmax of each 2×2 block of the 2H×2W output
      const int W2 = W * 2, H2 = H * 2;
      for (int it = tid; it < BM * BN; it += NT) {
        const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
        if (m >= p.M || n >= p.N) continue;
        const size_t ai = size_t(m) * p.ld_aux + n;
        const float v = load_f(aux + ai) > 0.f ? ct[r * CLD + c] : 0.f;
        const int a = p.argmax_in[ai];
        int img, y, x;
        decode_pixel(m, false, p.lh, p.lw, img, y, x);
        const size_t base = ((size_t(img) * H2 + 2 * y) * W2 + 2 * x) * p.ldo + n;
        store_f(out + base, a == 0 ? v : 0.f);
        store_f(out + base + p.ldo, a == 1 ? v : 0.f);
        store_f(out + base + size_t(W2) * p.ldo, a == 2 ? v : 0.f);
        store_f(out + base + size_t(W2 + 1) * p.ldo, a == 3 ? v : 0.f);
      }
      break;
    }
    case 4: {  // MSE loss against the uint8 input, gradient into out
      __shared__ float red[32];
      const int lohw = p.loh + p.low;
      const int pos0 = p.order_pos ? *p.order_pos : 0;
      float local = 0.f;
      // Channels of the image; up2_subpixel: column n is channel n % sub_k of parity n / sub_k.
      const int C = p.sub_k ? p.sub_k : p.N;
      const int cols = (out && !p.sub_k) ? p.ldo : p.N;
      for (int it = tid; it < BM * BN; it += NT) {
        const int r = it / BN, c = it % BN, m = m0 + r, n = n0 + c;
        if (m >= p.M || n >= cols) continue;
        int img, y, x;
        decode_pixel(m, false, p.lh, p.lw, img, y, x);
        int ch = n, Y = y, X = x;
        if (p.sub_k) {
          const int q = n / p.sub_k;
          ch = n - q * p.sub_k;
          Y = (y << 1) + (q >> 1);
          X = (x << 1) + (q & 1);
        } else if (p.parity) {
          Y = (y << 1) + oy;
          X = (x << 1) + ox;
        }
        const int pix = (Y << p.low) + X;
        const size_t opix = (size_t(img) << lohw) + pix;
        if (n >= p.N) {
          store_f(out + opix * p.ldo + n, 0.f);
          continue;
        }
        if (out && p.sub_k && ch == C - 1)
          for (int j = C; j < p.ldo; ++j) store_f(out + opix * p.ldo + j, 0.f);
        const float v = ct[r * CLD + c] + (p.bias ? p.bias[ch] : 0.f);
        const int idx = p.order ? p.order[pos0 + img] : img;
        const float target = float(p.images[((size_t(idx) * C + ch) << lohw) + pix]) * (1.f / 255.f);
        const float d = v - target;
        local += d * d;
        if (out) store_f(out + opix * p.ldo + ch, d * p.grad_scale);
        if (p.out_nchw) p.out_nchw[((size_t(img) * C + ch) << lohw) + pix] = v;
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
      break;
    }
  }
}

template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES>
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
  const T* wgt = static_cast<const T*>(p.wgt) + size_t(par) * p.N * p.Kpad;
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
      decode_pixel(m, p.quad, p.lh, p.lw, img, y, x);
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
    b_ok[i] = s < BN * kChunksPerRow && n < p.N;
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
  zero_acc(acc);

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

  conv_epilogue<T, BM, BN, NT>(p, ct, m0, n0, par);
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

template <typename T>
__global__ void __launch_bounds__(128) subpixel_halo_kernel(const ConvK p) {
  constexpr int BM = kHaloRows * kHaloW, BN = 16, NT = 128, HC = kHaloW + 2;
  constexpr int CH = 16 / int(sizeof(T)), KE = kRowBytes / int(sizeof(T));
  constexpr int MI = 2, NI = 2;  // each of the 4 warps: 32 rows (two map rows) × 16 columns
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.x * BM;
  const int img = m0 >> (p.lh + p.lw), y0 = (m0 >> p.lw) & ((1 << p.lh) - 1);
  const T* src = static_cast<const T*>(p.src);
  const T* wgt = static_cast<const T*>(p.wgt);
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
      const bool ok = n < p.N;
      const T* g = ok ? wgt + size_t(n) * p.Kpad + t * Cs + c0 + ch * CH : wgt;
      cp_async16(st + kHaloAStage + row * kRowPitch + ch * 16, g, ok);
    }
  };

  float acc[MI][NI][4];
  zero_acc(acc);

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
  conv_epilogue<T, BM, BN, NT>(p, ct, m0, 0, 0);
}

// Whether the halo kernel takes this convolution (AE_SUBPIXEL_GATHER=1: never, to compare).
bool use_subpixel_halo(const ConvK& k, int elem_bytes) {
  static const bool off = std::getenv("AE_SUBPIXEL_GATHER") != nullptr;
  return !off && k.sub_k && k.Ws == kHaloW && k.Hs % kHaloRows == 0 && (1 << k.lcs) * elem_bytes % kRowBytes == 0 &&
         k.N <= 16 && k.M % (kHaloRows * kHaloW) == 0;
}

template <typename T, int BM, int BN, int WM_, int WN_, int ST>
void launch_conv(const ConvK& k, cudaStream_t stream) {
  constexpr int smem = conv_smem_bytes<BM, BN, ST>();
  dim3 grid((k.M + BM - 1) / BM, (k.N + BN - 1) / BN, k.parity ? 4 : 1);
  if ((k.epi == 0 || k.epi == 4) && !k.sub_k) grid.y = (std::max(k.N, k.ldo) + BN - 1) / BN;
  conv_igemm_kernel<T, BM, BN, WM_, WN_, ST><<<grid, WM_ * WN_ * 32, smem, stream>>>(k);
  AE_CUDA_LAUNCH_CHECK();
}

// Tile variants of the 128×128 kernels, for tuning (AE_CONV_VARIANT / AE_WGRAD_VARIANT,
// read once): 0 = 8 warps of 64×32, 3 stages; 1 = the same, 4 stages; 2 = 4 warps of
// 64×64, 3 stages; 3 = 4 warps of 64×64, 4 stages.
int variant_from_env(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
int conv_variant() {
  static const int v = variant_from_env("AE_CONV_VARIANT", 0);
  return v;
}
int wgrad_variant() {
  static const int v = variant_from_env("AE_WGRAD_VARIANT", 0);
  return v;
}

template <typename T>
void dispatch_conv(const ConvK& k, cudaStream_t stream) {
  if (use_subpixel_halo(k, int(sizeof(T)))) {
    subpixel_halo_kernel<T><<<unsigned(k.M / (kHaloRows * kHaloW)), 128, kHaloSmem, stream>>>(k);
    AE_CUDA_LAUNCH_CHECK();
    return;
  }
  if (k.N <= 16 && k.ldo <= 16) {
    launch_conv<T, 128, 16, 4, 1, 3>(k, stream);
    return;
  }
  // A reduction of one or two stages (the first encoder layer, the output layer's input
  // gradient): no pipeline to fill, the time goes to loads and the epilogue, so 64-row
  // blocks with two stages let more of them overlap. H100, batch 256, whole step: 1.305 ms
  // with the 128×128/3-stage tiles, 1.316 (128×128/2), 1.288 (64×128/2, the default),
  // 1.348 (64×128/3), 1.346 (64×128, 4 warps/2). AE_SHORTK_VARIANT=0..4 picks one.
  const int KT = k.Kpad / (kRowBytes / int(sizeof(T)));
  if (KT <= 2) {
    static const int v = variant_from_env("AE_SHORTK_VARIANT", 2);
    switch (v) {
      case 0: break;
      case 1: launch_conv<T, 128, 128, 2, 4, 2>(k, stream); return;
      case 3: launch_conv<T, 64, 128, 2, 4, 3>(k, stream); return;
      case 4: launch_conv<T, 64, 128, 1, 4, 2>(k, stream); return;
      default: launch_conv<T, 64, 128, 2, 4, 2>(k, stream); return;
    }
  }
  // Too few 128-row tiles to give every multiprocessor two blocks: use 64-row tiles.
  const int64_t tiles128 = int64_t((k.M + 127) / 128) * ((std::max(k.N, k.ldo) + 127) / 128) * (k.parity ? 4 : 1);
  if (tiles128 < 2 * int64_t(sm_count())) {
    launch_conv<T, 64, 128, 2, 4, 3>(k, stream);
    return;
  }
  switch (conv_variant()) {
    case 1: launch_conv<T, 128, 128, 2, 4, 4>(k, stream); break;
    case 2: launch_conv<T, 128, 128, 2, 2, 3>(k, stream); break;
    case 3: launch_conv<T, 128, 128, 2, 2, 4>(k, stream); break;
    default: launch_conv<T, 128, 128, 2, 4, 3>(k, stream); break;
  }
}

// ---- weight gradient ---------------------------------------------------------------------
struct PixOpK {
  const void* src;
  int Hs, Ws, lcs, lup;
  int kind;  // PixelMatrix::Kind
  int sub;   // plain: read at (2y+dy, 2x+dx) of the parity
  const uint8_t* argmax;  // unpooled: the pool's pick per element of src
};
struct WgradK {
  PixOpK a, b;
  int lh, lw;  // reduction grid
  int64_t P;   // pixels per parity
  int pix_per_split, splits, parity;
  float* partial;
  int Mp, Np;
};

// What one thread's chunk slot of a pixel-matrix operand needs across all stages: its
// column fixes the channel, the tap and the tap's pixel offset, so a stage only decodes
// the pixel (shifts) and tests bounds.
struct ChunkCol {
  int c;       // source channel of the chunk's first element; -1: the column is padding
  int dy, dx;  // tap offset (patch kinds; with the parity already added)
  int tap_off; // dy·W + dx: the offset of a linear pixel index (same-grid patches)
};

template <typename T>
__device__ __forceinline__ ChunkCol chunk_col(const PixOpK& op, int lw, int par, int col) {
  constexpr int CH = 16 / int(sizeof(T));
  const int Cs = 1 << op.lcs;
  ChunkCol cc{-1, 0, 0, 0};
  if (op.kind == 0 || op.kind == 4) {  // plain, unpooled (columns as plain)
    if (col + CH <= Cs) cc.c = col;
    return cc;
  }
  const int t = col >> op.lcs;
  int ky, kx;
  if (op.kind == 3) {  // patch2_parity: origin (y+dy−1, x+dx−1)
    if (t >= 4) return cc;
    ky = (t >> 1) + (par >> 1) - 1;
    kx = (t & 1) + (par & 1) - 1;
  } else {
    if (t >= 9) return cc;
    ky = t / 3;
    kx = t % 3;
    if (op.kind == 2) {  // mirrored
      ky = 2 - ky;
      kx = 2 - kx;
    }
    ky -= 1;
    kx -= 1;
  }
  cc.c = col & (Cs - 1);
  cc.dy = ky;
  cc.dx = kx;
  cc.tap_off = (ky << lw) + kx;
  return cc;
}

// The unpooled operand (PixelMatrix::unpooled, operand A only): a chunk is the pooled
// gradient at (y/2, x/2), zeroed where the pool picked another pixel of the 2×2 block.
// Reading the pooled gradient and one pick byte per element instead of a written-out
// unpooled tensor moves a quarter of the bytes, and the write of that tensor is gone
// (docs/GPU.md). The select needs registers, so cp.async cannot do it: a stage's chunks are
// fetched with plain loads before the previous stage's MMAs and selected and stored to
// shared memory after them, which hides the load latency behind that compute.
struct UnpooledChunk {
  uint4 g;   // 8 bf16 / 4 fp32 values of the pooled gradient
  uint2 am;  // their picks (bytes; fp32 uses am.x)
};

// Element index of (pix, c) in the pooled source; `here`: the pick value of pix, in 4 bytes.
__device__ __forceinline__ size_t unpooled_source(const PixOpK& op, int lh, int lw, int pix, int c, uint32_t& here) {
  const int img = pix >> (lh + lw), y = (pix >> lw) & ((1 << lh) - 1), x = pix & ((1 << lw) - 1);
  here = uint32_t(((y & 1) << 1) | (x & 1)) * 0x01010101u;
  return (size_t((((img << (lh - 1)) + (y >> 1)) << (lw - 1)) + (x >> 1)) << op.lcs) + size_t(c);
}

template <typename T>
__device__ __forceinline__ UnpooledChunk fetch_unpooled(const PixOpK& op, int lh, int lw, int pix, int c, bool ok) {
  UnpooledChunk u{make_uint4(0u, 0u, 0u, 0u), make_uint2(0u, 0u)};
  if (ok) {
    uint32_t here;
    const size_t e = unpooled_source(op, lh, lw, pix, c, here);
    u.g = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(op.src) + e));
    if constexpr (sizeof(T) == 2)
      u.am = __ldg(reinterpret_cast<const uint2*>(op.argmax + e));
    else
      u.am.x = __ldg(reinterpret_cast<const unsigned int*>(op.argmax + e));
  }
  return u;
}

// __vcmpeq4 gives 0xff in each byte whose pick is this pixel; __byte_perm widens those
// bytes to the element's width. Rows past the end were fetched as zeros and stay zero.
template <typename T>
__device__ __forceinline__ void store_unpooled(const PixOpK& op, int lh, int lw, int pix, int c, UnpooledChunk u,
                                               uint32_t dst) {
  uint32_t here;
  unpooled_source(op, lh, lw, pix, c, here);
  uint4 v = u.g;
  if constexpr (sizeof(T) == 2) {
    const uint32_t lo = __vcmpeq4(u.am.x, here), hi = __vcmpeq4(u.am.y, here);
    v.x &= __byte_perm(lo, 0, 0x1100);
    v.y &= __byte_perm(lo, 0, 0x3322);
    v.z &= __byte_perm(hi, 0, 0x1100);
    v.w &= __byte_perm(hi, 0, 0x3322);
  } else {
    const uint32_t m = __vcmpeq4(u.am.x, here);
    v.x &= __byte_perm(m, 0, 0x0000);
    v.y &= __byte_perm(m, 0, 0x1111);
    v.z &= __byte_perm(m, 0, 0x2222);
    v.w &= __byte_perm(m, 0, 0x3333);
  }
  st_shared16(dst, v);
}

// One 16-byte chunk: row `pix` of the reduction grid (lh, lw), the slot's column.
template <typename T>
__device__ __forceinline__ void load_pix_chunk(const PixOpK& op, const ChunkCol& cc, int lh, int lw, int par, int pix,
                                               bool pix_ok, uint32_t dst) {
  const T* base = static_cast<const T*>(op.src);
  bool ok = pix_ok && cc.c >= 0;
  int spix;  // source pixel index
  if (op.kind != 0) {  // patches read the reduction grid itself (no upsampling, no parity subsampling)
    const int y = (pix >> lw) & ((1 << lh) - 1), x = pix & ((1 << lw) - 1);
    ok = ok && unsigned(y + cc.dy) < unsigned(1 << lh) && unsigned(x + cc.dx) < unsigned(1 << lw);
    spix = pix + cc.tap_off;
  } else if (op.sub) {  // dY at (2y+dy, 2x+dx) of a grid twice the size
    const int img = pix >> (lh + lw), y = (pix >> lw) & ((1 << lh) - 1), x = pix & ((1 << lw) - 1);
    spix = (((img << (lh + 1)) + (y << 1) + (par >> 1)) << (lw + 1)) + (x << 1) + (par & 1);
  } else if (op.lup) {  // the source upsampled ×2 onto the grid
    const int img = pix >> (lh + lw), y = (pix >> lw) & ((1 << lh) - 1), x = pix & ((1 << lw) - 1);
    spix = (((img << (lh - 1)) + (y >> 1)) << (lw - 1)) + (x >> 1);
  } else {
    spix = pix;
  }
  const T* g = ok ? base + ((size_t(spix) << op.lcs) + cc.c) : base;
  cp_async16(dst, g, ok);
}

template <typename T, int BM, int BN>
struct WgradGeom {
  static constexpr int KR = 128 / int(sizeof(T));  // pixels per stage (four mma k-steps)
  static constexpr int PAD = sizeof(T) == 2 ? 16 : 32;
  static constexpr int A_PITCH = BM * int(sizeof(T)) + PAD, B_PITCH = BN * int(sizeof(T)) + PAD;
  static constexpr int STAGE = KR * (A_PITCH + B_PITCH);
};

template <typename T, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool UNPOOLED_A>
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
  const ChunkCol a_col = chunk_col<T>(p.a, p.lw, par, i0 + (tid % A_CPR) * CH);
  const ChunkCol b_col = chunk_col<T>(p.b, p.lw, par, j0 + (tid % B_CPR) * CH);

  auto load_stage = [&](int kt, int slot) {
    const uint32_t sA = sbase + slot * G::STAGE, sB = sA + KR * G::A_PITCH;
    const int pb = int(p_begin) + kt * KR;
    if constexpr (!UNPOOLED_A) {  // else fetch_a / store_a
#pragma unroll
      for (int i = 0; i < A_IT; ++i) {
        const int s = tid + i * NT;
        if (A_IT * NT > A_CHUNKS && s >= A_CHUNKS) break;
        const int row = s / A_CPR, cc = s % A_CPR, pix = pb + row;
        load_pix_chunk<T>(p.a, a_col, p.lh, p.lw, par, pix, pix < p_end, sA + row * G::A_PITCH + cc * 16);
      }
    }
#pragma unroll
    for (int i = 0; i < B_IT; ++i) {
      const int s = tid + i * NT;
      if (B_IT * NT > B_CHUNKS && s >= B_CHUNKS) break;
      const int row = s / B_CPR, cc = s % B_CPR, pix = pb + row;
      load_pix_chunk<T>(p.b, b_col, p.lh, p.lw, par, pix, pix < p_end, sB + row * G::B_PITCH + cc * 16);
    }
  };

  // Operand A unpooled: registers between a stage's fetch and its store to shared memory.
  UnpooledChunk a_regs[UNPOOLED_A ? A_IT : 1];
  auto fetch_a = [&](int kt) {
    const int pb = int(p_begin) + kt * KR;
#pragma unroll
    for (int i = 0; i < A_IT; ++i) {
      const int s = tid + i * NT;
      if (A_IT * NT > A_CHUNKS && s >= A_CHUNKS) break;
      const int pix = pb + s / A_CPR;
      a_regs[i] = fetch_unpooled<T>(p.a, p.lh, p.lw, pix, a_col.c, pix < p_end && a_col.c >= 0);
    }
  };
  auto store_a = [&](int kt, int slot) {
    const uint32_t sA = sbase + slot * G::STAGE;
    const int pb = int(p_begin) + kt * KR;
#pragma unroll
    for (int i = 0; i < A_IT; ++i) {
      const int s = tid + i * NT;
      if (A_IT * NT > A_CHUNKS && s >= A_CHUNKS) break;
      const int row = s / A_CPR, cc = s % A_CPR;
      store_unpooled<T>(p.a, p.lh, p.lw, pb + row, a_col.c < 0 ? 0 : a_col.c, a_regs[i],
                        sA + row * G::A_PITCH + cc * 16);
    }
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

  float* part = p.partial + size_t(blockIdx.z) * p.Mp * p.Np;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int i = i0 + wm * WM + mi * 16 + (lane >> 2), j = j0 + wn * WN + ni * 8 + (lane & 3) * 2;
      *reinterpret_cast<float2*>(part + size_t(i) * p.Np + j) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(part + size_t(i + 8) * p.Np + j) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}

template <typename T, int BM, int BN, int WM_, int WN_, int ST, bool UA = false>
void launch_wgrad(const WgradK& k, int splits, cudaStream_t stream) {
  constexpr int smem = ST * WgradGeom<T, BM, BN>::STAGE;
  dim3 grid(k.Mp / BM, k.Np / BN, splits * (k.parity ? 4 : 1));
  wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, UA><<<grid, WM_ * WN_ * 32, smem, stream>>>(k);
  AE_CUDA_LAUNCH_CHECK();
}

template <typename T>
void dispatch_wgrad(const WgradK& k, const WgradPlan& plan, cudaStream_t stream) {
  if (k.a.kind == int(PixelMatrix::unpooled)) {  // the default tile of each width only
    if (plan.bn == 128)
      launch_wgrad<T, 128, 128, 2, 4, 3, true>(k, plan.splits, stream);
    else if (plan.bn == 32)
      launch_wgrad<T, 128, 32, 4, 1, 3, true>(k, plan.splits, stream);
    else
      launch_wgrad<T, 128, 16, 4, 1, 3, true>(k, plan.splits, stream);
    return;
  }
  if (plan.bn == 128) {
    switch (wgrad_variant()) {
      case 1: launch_wgrad<T, 128, 128, 2, 4, 4>(k, plan.splits, stream); break;
      case 2: launch_wgrad<T, 128, 128, 2, 2, 3>(k, plan.splits, stream); break;
      case 3: launch_wgrad<T, 128, 128, 2, 2, 4>(k, plan.splits, stream); break;
      default: launch_wgrad<T, 128, 128, 2, 4, 3>(k, plan.splits, stream); break;
    }
  } else if (plan.bn == 32)
    launch_wgrad<T, 128, 32, 4, 1, 3>(k, plan.splits, stream);
  else
    launch_wgrad<T, 128, 16, 4, 1, 3>(k, plan.splits, stream);
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
    const int t = int(idx % 9), c = int((idx / 9) % s.C), k = int(idx / (9 * int64_t(s.C)));
    dst = s.weight_grad + idx;
    switch (s.mode) {
      case WgradScatter::out_by_patch: {
        const int j = s.rgb_im2col ? t * 3 + c : t * s.Cs + c;
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

template <typename T, int BM, int BN, int WM_, int WN_, int ST>
void allow_conv_smem() {
  AE_CUDA_CHECK(cudaFuncSetAttribute(conv_igemm_kernel<T, BM, BN, WM_, WN_, ST>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, conv_smem_bytes<BM, BN, ST>()));
}
template <typename T, int BM, int BN, int WM_, int WN_, int ST, bool UA = false>
void allow_wgrad_smem() {
  AE_CUDA_CHECK(cudaFuncSetAttribute(wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, UA>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     ST * WgradGeom<T, BM, BN>::STAGE));
}
template <typename T>
void allow_smem_all() {
  AE_CUDA_CHECK(cudaFuncSetAttribute(subpixel_halo_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kHaloSmem));
  allow_conv_smem<T, 128, 16, 4, 1, 3>();
  allow_conv_smem<T, 128, 128, 2, 4, 3>();
  allow_conv_smem<T, 64, 128, 2, 4, 3>();
  allow_conv_smem<T, 128, 128, 2, 4, 2>();
  allow_conv_smem<T, 64, 128, 2, 4, 2>();
  allow_conv_smem<T, 64, 128, 1, 4, 2>();
  allow_conv_smem<T, 128, 128, 2, 4, 4>();
  allow_conv_smem<T, 128, 128, 2, 2, 3>();
  allow_conv_smem<T, 128, 128, 2, 2, 4>();
  allow_wgrad_smem<T, 128, 128, 2, 4, 3>();
  allow_wgrad_smem<T, 128, 128, 2, 4, 4>();
  allow_wgrad_smem<T, 128, 128, 2, 2, 3>();
  allow_wgrad_smem<T, 128, 128, 2, 2, 4>();
  allow_wgrad_smem<T, 128, 32, 4, 1, 3>();
  allow_wgrad_smem<T, 128, 16, 4, 1, 3>();
  allow_wgrad_smem<T, 128, 128, 2, 4, 3, true>();
  allow_wgrad_smem<T, 128, 32, 4, 1, 3, true>();
  allow_wgrad_smem<T, 128, 16, 4, 1, 3, true>();
}

}  // namespace

// ---- public entry points -----------------------------------------------------------------
void init_kernels() {
  // Kernels using more than 48 KB of shared memory must say so once per process; done
  // here, outside any stream capture.
  static std::once_flag once;
  std::call_once(once, [] {
    allow_smem_all<bf16>();
    allow_smem_all<float>();
  });
}

void conv_igemm(const ConvArgs& a, DType t, cudaStream_t stream) {
  if (a.images <= 0) return;
  init_kernels();
  if (a.Cs < 8) throw std::invalid_argument("conv_igemm: channel pitch must be ≥ 8");
  ConvK k{};
  k.src = a.src;
  k.Hs = a.Hs;
  k.Ws = a.Ws;
  k.lcs = ilog2_exact(a.Cs, "conv_igemm: channel pitch");
  if (a.up != 1) throw std::invalid_argument("conv_igemm: the source must not be upsampled (use up2_parity)");
  k.lup = 0;
  const int lhv = ilog2_exact(a.Hs * a.up, "conv_igemm: height"), lwv = ilog2_exact(a.Ws * a.up, "conv_igemm: width");
  switch (a.shape) {
    case ConvShape::same3x3:
      k.lh = lhv, k.lw = lwv, k.taps = 9, k.ksz = 3, k.lksz = 0, k.lstride = 0, k.org = -1;
      break;
    case ConvShape::point1x1:
      k.lh = lhv, k.lw = lwv, k.taps = 1, k.ksz = 1, k.lksz = 0, k.lstride = 0, k.org = 0;
      break;
    case ConvShape::up2_parity:
      if (a.up != 1) throw std::invalid_argument("conv_igemm: up2_parity upsamples by itself");
      k.lh = lhv, k.lw = lwv, k.taps = 4, k.ksz = 2, k.lksz = 1, k.lstride = 0, k.org = -1, k.parity = 1;
      break;
    case ConvShape::down2_4x4:
      if (a.up != 1 || lhv < 1 || lwv < 1) throw std::invalid_argument("conv_igemm: bad down2_4x4 source");
      k.lh = lhv - 1, k.lw = lwv - 1, k.taps = 16, k.ksz = 4, k.lksz = 2, k.lstride = 1, k.org = -1;
      break;
    case ConvShape::up2_subpixel:
      if (a.epilogue != ConvEpilogue::store && a.epilogue != ConvEpilogue::loss)
        throw std::invalid_argument("conv_igemm: up2_subpixel takes the store or loss epilogue");
      if (4 * a.N > 16) throw std::invalid_argument("conv_igemm: up2_subpixel is for at most 4 output channels");
      k.lh = lhv, k.lw = lwv, k.taps = 9, k.ksz = 3, k.lksz = 0, k.lstride = 0, k.org = -1;
      k.sub_k = a.N;
      break;
  }
  k.loh = k.lh + ((k.parity || k.sub_k) ? 1 : 0);
  k.low = k.lw + ((k.parity || k.sub_k) ? 1 : 0);
  if (a.Kpad % 64 != 0 || a.Kpad < k.taps * a.Cs) throw std::invalid_argument("conv_igemm: Kpad must be a multiple of 64 ≥ taps·Cs");
  const int64_t M = int64_t(a.images) << (k.lh + k.lw);
  if (M > (int64_t(1) << 30)) throw std::invalid_argument("conv_igemm: too many pixels");
  k.M = int(M);
  k.Kpad = a.Kpad;
  k.wgt = a.weights;
  k.N = k.sub_k ? 4 * a.N : a.N;  // up2_subpixel: all four parities' channels are columns
  k.epi = int(a.epilogue);
  k.quad = a.epilogue == ConvEpilogue::pool ? 1 : 0;
  if ((k.quad || a.epilogue == ConvEpilogue::unpool_mask || a.epilogue == ConvEpilogue::mask) && k.parity)
    throw std::invalid_argument("conv_igemm: this epilogue does not take up2_parity");
  if (k.quad && a.shape != ConvShape::same3x3 && a.shape != ConvShape::point1x1)
    throw std::invalid_argument("conv_igemm: pooling needs a same-size convolution");
  k.relu = a.relu ? 1 : 0;
  k.bias = a.bias;
  k.out = a.out;
  k.ldo = a.ldo;
  k.argmax_out = a.argmax_out;
  k.aux = a.aux;
  k.ld_aux = a.ld_aux;
  k.argmax_in = a.argmax_in;
  k.out_nchw = a.out_nchw;
  k.images = a.images_u8;
  k.order = a.order;
  k.order_pos = a.order_pos;
  k.grad_scale = a.grad_scale;
  k.loss_sum = a.loss_sum;
  if (k.ldo < a.N && a.epilogue != ConvEpilogue::loss) throw std::invalid_argument("conv_igemm: ldo < N");
  // 8-channel vector epilogue when every 8-channel group is all valid or all padding.
  k.vec = (!k.sub_k && k.N % 8 == 0 && k.ldo % 8 == 0 && (!a.aux || a.ld_aux % 8 == 0) && (!a.bias || k.N % 8 == 0)) ? 1 : 0;
  if (t == DType::bf16)
    dispatch_conv<bf16>(k, stream);
  else
    dispatch_conv<float>(k, stream);
}

namespace {
// Blocks of the weight-gradient kernel that one multiprocessor holds at once.
template <typename T, int BM, int BN, int WM_, int WN_, int ST>
int wgrad_occupancy() {
  int n = 0;
  AE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgrad_igemm_kernel<T, BM, BN, WM_, WN_, ST, false>,
                                                              WM_ * WN_ * 32, ST * WgradGeom<T, BM, BN>::STAGE));
  return std::max(n, 1);
}
template <typename T>
int wgrad_blocks_per_sm(int bn) {
  if (bn == 128) {
    switch (wgrad_variant()) {
      case 1: return wgrad_occupancy<T, 128, 128, 2, 4, 4>();
      case 2: return wgrad_occupancy<T, 128, 128, 2, 2, 3>();
      case 3: return wgrad_occupancy<T, 128, 128, 2, 2, 4>();
      default: return wgrad_occupancy<T, 128, 128, 2, 4, 3>();
    }
  }
  return bn == 32 ? wgrad_occupancy<T, 128, 32, 4, 1, 3>() : wgrad_occupancy<T, 128, 16, 4, 1, 3>();
}
}  // namespace

WgradPlan plan_wgrad(int M, int N, int images, int grid_h, int grid_w, int parities, DType t, int max_splits) {
  init_kernels();
  WgradPlan p;
  p.bm = 128;
  p.bn = N > 32 ? 128 : N > 16 ? 32 : 16;
  p.Mp = (M + p.bm - 1) / p.bm * p.bm;
  p.Np = (N + p.bn - 1) / p.bn * p.bn;
  p.parities = parities;
  p.grid_h = grid_h;
  p.grid_w = grid_w;
  p.pixels = int64_t(images) * grid_h * grid_w;
  const int tiles = (p.Mp / p.bm) * (p.Np / p.bn) * parities;
  const int64_t kr = 64;  // a multiple of both element types' pixels per stage
  // As many splits as fill the GPU's block slots in one wave (a partial second wave would
  // leave most multiprocessors idle), each with at least 8 stages of pixels.
  const int64_t slots = int64_t(sm_count()) * (t == DType::bf16 ? wgrad_blocks_per_sm<bf16>(p.bn)
                                                                   : wgrad_blocks_per_sm<float>(p.bn));
  const int64_t want = std::max<int64_t>(1, slots / tiles);
  const int64_t most = std::max<int64_t>(1, p.pixels / (8 * kr));
  // AE_WGRAD_MAX_SPLITS=N overrides the cap, for tuning (64, the earlier cap, left the first
  // encoder layer's 2 tiles on 128 blocks: under one per multiprocessor).
  static const int env_cap = variant_from_env("AE_WGRAD_MAX_SPLITS", 0);
  if (env_cap > 0) max_splits = env_cap;
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
  init_kernels();
  if (a.Cs < 8 || b.Cs < 8) throw std::invalid_argument("wgrad_igemm: channel pitch must be ≥ 8");
  if (plan.parities != 1 && plan.parities != 4) throw std::invalid_argument("wgrad_igemm: parities must be 1 or 4");
  auto op = [](const PixelMatrix& m) {
    PixOpK o{};
    o.src = m.src;
    o.Hs = m.Hs;
    o.Ws = m.Ws;
    o.lcs = ilog2_exact(m.Cs, "wgrad_igemm: channel pitch");
    o.lup = ilog2_exact(m.up, "wgrad_igemm: upsampling");
    o.kind = int(m.kind);
    o.sub = m.parity_subsample ? 1 : 0;
    o.argmax = m.argmax;
    return o;
  };
  for (const PixelMatrix* m : {&a, &b}) {
    if (m->kind != PixelMatrix::plain && (m->up != 1 || m->parity_subsample))
      throw std::invalid_argument("wgrad_igemm: patches are taken on the reduction grid itself");
  }
  if (b.kind == PixelMatrix::unpooled) throw std::invalid_argument("wgrad_igemm: only operand A can be unpooled");
  if (a.kind == PixelMatrix::unpooled &&
      (!a.argmax || plan.parities != 1 || 2 * a.Hs != plan.grid_h || 2 * a.Ws != plan.grid_w))
    throw std::invalid_argument("wgrad_igemm: an unpooled operand needs its argmax and a grid twice its size");
  if (plan.pixels > (int64_t(1) << 30)) throw std::invalid_argument("wgrad_igemm: too many pixels");
  WgradK k{};
  k.a = op(a);
  k.b = op(b);
  k.lh = ilog2_exact(plan.grid_h, "wgrad_igemm: grid height");
  k.lw = ilog2_exact(plan.grid_w, "wgrad_igemm: grid width");
  k.P = plan.pixels;
  k.pix_per_split = plan.pix_per_split;
  k.splits = plan.splits;
  k.parity = plan.parities == 4 ? 1 : 0;
  k.partial = workspace;
  k.Mp = plan.Mp;
  k.Np = plan.Np;
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
