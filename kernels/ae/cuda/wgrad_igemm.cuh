// What the weight-gradient GEMM's two engines share (wgrad_igemm.cu: mma.sync, any GPU
// from sm_80; wgrad_wgmma.cu: Hopper's warpgroup MMA): the kernel parameter and the
// gathers of the pixel-matrix operands into shared memory. Internal to kernels/ae/cuda; the
// entry points are in ops.cuh, the design in docs/GPU.md.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/ae/cuda/fast_divmod.cuh"
#include "kernels/ae/cuda/igemm_common.cuh"
#include "kernels/ae/cuda/ops.cuh"
#include "kernels/ae/cuda/mma_ptx.cuh"

namespace ae::cuda::igemm {

using namespace ae::cuda::ptx;

// ---- weight gradient ---------------------------------------------------------------------
struct PixOpK {
  const void* src;
  int Hs, Ws, lcs;
  PixelMatrix::Kind kind;
  int sub;   // plain: read at (2y+dy, 2x+dx) of the parity
  const uint8_t* argmax;  // unpooled: the pool's pick per element of src
};
struct WgradK {
  PixOpK a, b;
  int gh, gw;                  // reduction grid
  FastDivmod div_gw, div_ghw;  // ÷gw, ÷(gh·gw): pixel → (row = image·gh + y, x), (image, y)
  int64_t P;                   // pixels per parity
  int pix_per_split, splits, parity;
  float* partial;
  int Mp, Np;
};

// What one thread's chunk slot of a pixel-matrix operand needs across all stages: its
// column fixes the channel, the tap and the tap's pixel offset, so a stage only decodes
// the pixel (a multiply-shift division or two) and tests bounds.
struct ChunkCol {
  int c;       // source channel of the chunk's first element; -1: the column is padding
  int dy, dx;  // tap offset (patch kinds; with the parity already added)
  int tap_off; // dy·W + dx: the offset of a linear pixel index (same-grid patches)
};

template <typename T>
__device__ __forceinline__ ChunkCol chunk_col(const PixOpK& op, int gw, int par, int col) {
  constexpr int CH = 16 / int(sizeof(T));
  const int Cs = 1 << op.lcs;
  ChunkCol cc{-1, 0, 0, 0};
  if (op.kind == PixelMatrix::plain || op.kind == PixelMatrix::unpooled) {  // columns as plain
    if (col + CH <= Cs) cc.c = col;
    return cc;
  }
  const int t = col >> op.lcs;
  int ky, kx;
  if (op.kind == PixelMatrix::patch2_parity) {  // origin (y+dy−1, x+dx−1)
    if (t >= 4) return cc;
    ky = (t >> 1) + (par >> 1) - 1;
    kx = (t & 1) + (par & 1) - 1;
  } else {
    if (t >= 9) return cc;
    ky = t / 3;
    kx = t % 3;
    if (op.kind == PixelMatrix::patch3_flipped) {
      ky = 2 - ky;
      kx = 2 - kx;
    }
    ky -= 1;
    kx -= 1;
  }
  cc.c = col & (Cs - 1);
  cc.dy = ky;
  cc.dx = kx;
  cc.tap_off = ky * gw + kx;
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
// The grid is even both ways, so with row = image·gh + y the pooled row is row/2 and the
// parities of y and x are those of row and pix: one division.
template <bool POW2>
__device__ __forceinline__ size_t unpooled_source(const PixOpK& op, const WgradK& p, int pix, int c, uint32_t& here) {
  int row, x;
  p.div_gw.divmod_as<POW2>(pix, row, x);
  here = uint32_t(((row & 1) << 1) | (x & 1)) * 0x01010101u;
  return (size_t((row >> 1) * op.Ws + (x >> 1)) << op.lcs) + size_t(c);
}

template <typename T, bool POW2>
__device__ __forceinline__ UnpooledChunk fetch_unpooled(const PixOpK& op, const WgradK& p, int pix, int c, bool ok) {
  UnpooledChunk u{make_uint4(0u, 0u, 0u, 0u), make_uint2(0u, 0u)};
  if (ok) {
    uint32_t here;
    const size_t e = unpooled_source<POW2>(op, p, pix, c, here);
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
template <typename T, bool POW2>
__device__ __forceinline__ void store_unpooled(const PixOpK& op, const WgradK& p, int pix, int c, UnpooledChunk u,
                                               uint32_t dst) {
  uint32_t here;
  unpooled_source<POW2>(op, p, pix, c, here);
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

// One 16-byte chunk: row `pix` of the reduction grid, the slot's column.
template <typename T, bool POW2>
__device__ __forceinline__ void load_pix_chunk(const PixOpK& op, const ChunkCol& cc, const WgradK& p, int par, int pix,
                                               bool pix_ok, uint32_t dst) {
  const T* base = static_cast<const T*>(op.src);
  bool ok = pix_ok && cc.c >= 0;
  int spix;  // source pixel index
  if (op.kind != PixelMatrix::plain) {  // patches read the reduction grid itself (no parity subsampling)
    int img, r, y, x;
    p.div_ghw.divmod_as<POW2>(pix, img, r);
    p.div_gw.divmod_as<POW2>(r, y, x);
    ok = ok && unsigned(y + cc.dy) < unsigned(p.gh) && unsigned(x + cc.dx) < unsigned(p.gw);
    spix = pix + cc.tap_off;
  } else if (op.sub) {  // dY at (2y+dy, 2x+dx) of a grid twice the size: with row = image·gh + y,
                        // the source row is 2·row + dy
    int row, x;
    p.div_gw.divmod_as<POW2>(pix, row, x);
    spix = (2 * row + (par >> 1)) * (2 * p.gw) + 2 * x + (par & 1);
  } else {
    spix = pix;
  }
  const T* g = ok ? base + ((size_t(spix) << op.lcs) + cc.c) : base;
  cp_async16(dst, g, ok);
}

// Where chunk cc (16 bytes) of pixel row `row` of an operand's stage lies. PITCH > 0: rows
// of PITCH bytes (padded for ldmatrix); PITCH = 0: the MN-major 128-byte swizzle that the
// warpgroup MMA reads (wgrad_wgmma.cu): blocks of 64 bf16 columns, each KR rows of 128 bytes,
// chunk j of row r at 16·(j ^ r % 8).
template <int PITCH, int KR>
__device__ __forceinline__ uint32_t operand_chunk_offset(int row, int cc) {
  if constexpr (PITCH > 0) return uint32_t(row * PITCH + cc * 16);
  else return uint32_t((cc >> 3) * KR * 128 + row * 128 + 16 * ((cc & 7) ^ (row & 7)));
}

// One operand's rows [pb, pb + KR) of a stage into shared memory at dst (layout: PITCH, KR
// as operand_chunk_offset): this thread's chunk slots s = tid + i·NT are row s / CPR, chunk
// s % CPR.
template <typename T, bool POW2, int NT, int IT, int CHUNKS, int CPR, int PITCH, int KR = 0>
__device__ __forceinline__ void load_operand_stage(const PixOpK& op, const ChunkCol& col, const WgradK& p, int par,
                                                   int pb, int64_t p_end, uint32_t dst, int tid) {
#pragma unroll
  for (int i = 0; i < IT; ++i) {
    const int s = tid + i * NT;
    if (IT * NT > CHUNKS && s >= CHUNKS) break;
    const int row = s / CPR, cc = s % CPR, pix = pb + row;
    load_pix_chunk<T, POW2>(op, col, p, par, pix, pix < p_end, dst + operand_chunk_offset<PITCH, KR>(row, cc));
  }
}

// The unpooled operand A of a stage in two halves (see UnpooledChunk): this thread's chunks
// fetched into registers, then selected and stored (layout: PITCH, KR as operand_chunk_offset).
template <typename T, bool POW2, int NT, int CHUNKS, int CPR, int IT>
__device__ __forceinline__ void fetch_unpooled_stage(const PixOpK& op, const ChunkCol& col, const WgradK& p, int pb,
                                                     int64_t p_end, UnpooledChunk (&regs)[IT], int tid) {
#pragma unroll
  for (int i = 0; i < IT; ++i) {
    const int s = tid + i * NT;
    if (IT * NT > CHUNKS && s >= CHUNKS) break;
    const int pix = pb + s / CPR;
    regs[i] = fetch_unpooled<T, POW2>(op, p, pix, col.c, pix < p_end && col.c >= 0);
  }
}
template <typename T, bool POW2, int NT, int CHUNKS, int CPR, int PITCH, int KR = 0, int IT>
__device__ __forceinline__ void store_unpooled_stage(const PixOpK& op, const ChunkCol& col, const WgradK& p, int pb,
                                                     const UnpooledChunk (&regs)[IT], uint32_t dst, int tid) {
#pragma unroll
  for (int i = 0; i < IT; ++i) {
    const int s = tid + i * NT;
    if (IT * NT > CHUNKS && s >= CHUNKS) break;
    const int row = s / CPR, cc = s % CPR;
    store_unpooled<T, POW2>(op, p, pb + row, col.c < 0 ? 0 : col.c, regs[i], dst + operand_chunk_offset<PITCH, KR>(row, cc));
  }
}

// A warp's accumulators (MI×NI tiles of 16×8 in mma.sync's layout; wgmma's per-warp rows
// are the same) into this block's split of the workspace: the warp's tile at (i0, j0).
template <int MI, int NI>
__device__ __forceinline__ void store_partial(const WgradK& p, const float (&acc)[MI][NI][4], int i0, int j0, int lane) {
  float* part = p.partial + size_t(blockIdx.z) * p.Mp * p.Np;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int i = i0 + mi * 16 + (lane >> 2), j = j0 + ni * 8 + (lane & 3) * 2;
      *reinterpret_cast<float2*>(part + size_t(i) * p.Np + j) = make_float2(acc[mi][ni][0], acc[mi][ni][1]);
      *reinterpret_cast<float2*>(part + size_t(i + 8) * p.Np + j) = make_float2(acc[mi][ni][2], acc[mi][ni][3]);
    }
}

template <typename T, int BM, int BN>
struct WgradGeom {
  static constexpr int KR = 128 / int(sizeof(T));  // pixels per stage (four mma k-steps)
  static constexpr int PAD = sizeof(T) == 2 ? 16 : 32;
  static constexpr int A_PITCH = BM * int(sizeof(T)) + PAD, B_PITCH = BN * int(sizeof(T)) + PAD;
  static constexpr int STAGE = KR * (A_PITCH + B_PITCH);
};

// The warpgroup-MMA weight gradient (wgrad_wgmma.cu, compiled for sm_90a only): bf16, 128
// columns per tile; UNPOOLED_A as wgrad_igemm_kernel's. Launched over the same grid.
template <bool UNPOOLED_A>
void launch_wgrad_wgmma(const WgradK& k, int splits, cudaStream_t stream);
int wgrad_wgmma_blocks_per_sm();

// The tf32 weight gradient from channel-major copies (wgrad_wgmma.cu, sm_90a; docs/GPU.md):
// A plain, B a 3×3 patch of a grid 16 pixels wide. a_cm: [a_cs][images·gh·16]; b_cm:
// [3][b_cs][images·gh·16], copy s shifted by s − 1 pixels (wgrad_igemm makes both). Tiles of
// bm (128 or 256) rows × 128 columns, one block per multiprocessor, over WgradK's grid and
// splits into its workspace.
struct WgradTaps {
  int images = 0;
  int a_cs = 0, b_cs = 0;  // the pitches; B's column j is tap j / b_cs, channel j % b_cs
  bool flipped = false;    // B is patch3_flipped
};
void launch_wgrad_wgmma_tf32(const WgradK& k, const WgradTaps& taps, const float* a_cm, const float* b_cm, int bm,
                             cudaStream_t stream);

}  // namespace ae::cuda::igemm
