// The autoencoder's fused NHWC operations on the GPU (namespace ae::cuda), which the GPU
// backend (backend_gpu.cu) runs every step through its plan (plan.h):
// implicit-GEMM convolution with fused epilogues (bias+ReLU, 2×2 max pool, upsample-sum
// and ReLU mask of the backward pass, max-unpool, MSE loss), implicit-GEMM weight
// gradients with a split-K reduction, and the small kernels around them. Activations
// are NHWC ("channels last") with a power-of-two channel pitch (channel_pitch()), any
// height and width; weights are packed [out][tap][in] so that the GEMM's reduction
// index k = tap·C + c reads contiguous channels. Pixel indices are decoded with
// precomputed multiply-shift divisions (fast_divmod.cuh), so sizes that are not powers
// of two cost no more than those that are. Channel padding (C..pitch−1) is zero in
// every tensor the kernels write, so the next GEMM may read it (it meets zero weights).
// See docs/GPU.md for the design. The CPU twins of kernels/ae/cpu/layers.h on device
// pointers, which only the tests call, are tests/gpu/support/layer_twins.cuh.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ae/backend.h"

namespace ae::cuda {

// ---- fused NHWC operations (stream-ordered, no allocation, no synchronisation) ---------
enum class DType { f32, bf16 };
inline size_t dtype_bytes(DType t) { return t == DType::bf16 ? 2 : 4; }

// log2 of v; throws "<what> must be a power of two" when it is not one.
int ilog2_exact(int v, const char* what);
// The NHWC channel pitch of a tensor with `channels` channels: the smallest power of two
// ≥ max(8, channels). Eight elements make the 16-byte (bf16) vector accesses whole; a
// power of two lets the GEMMs split k = tap·pitch + c with a shift.
int channel_pitch(int channels);

// Every epilogue writes all ldo channels of the pixels it writes: channels N..ldo−1 as 0
// (argmax 0).
enum class ConvEpilogue : int {
  store = 0,        // out[pixel][n] = act(acc + bias)
  pool = 1,         // 2×2 max pool of act(acc + bias) → out (H/2×W/2) + argmax (0..3);
                    //   the output grid H×W must be even in both directions
  mask = 2,         // backward through a ReLU: out = acc × (aux > 0), aux at the same pixel
  unpool_mask = 3,  // backward of "conv then ReLU then pool": acc × (aux > 0) routed to the
                    //   argmax position of a 2H×2W output, zeros elsewhere
  loss = 4,         // MSE against the uint8 input: Σ(out − x/255)² into loss_sum, gradient
                    //   grad_scale·(out − x/255) into out (ldo channels, pad zeroed)
};

// Which convolution the implicit GEMM computes (rows = output pixels, columns = output
// channels, reduction k = tap·Cs + c gathered on the fly from the NHWC source):
//   same3x3:    3×3, zero padding 1, output size = input size
//   point1x1:   1×1 (the source is already an im2col matrix)
//   up2_parity: "nearest upsample ×2, then 3×3" on a Hs×Ws source, computed without the
//               upsampled map: each of the four output parities (dy,dx) is a 2×2
//               convolution of the source with summed weights (4 weight matrices
//               [4][N][Kpad], parity dy·2+dx): 4·C instead of 9·C multiply-adds per output
//   up2_subpixel: the same "upsample, then 3×3" for at most 4 output channels N: one 3×3
//               convolution of the source whose 4·N columns are all four parities'
//               channels (weights [4·N][Kpad], row parity·N + k). Each source pixel is
//               gathered once for all parities (9 taps instead of 4 × 4), where tiles of
//               one parity's N channels would be mostly padding. Store and loss epilogues.
//               Any source size; a 16-wide source whose height is a multiple of 8 (and
//               whose pitch fills whole 128-byte stages) takes a halo-tiled kernel.
//   down2_4x4:  the input gradient of an up2 layer: "3×3 transposed, then sum each 2×2
//               block" is a 4×4 convolution with stride 2 (offset −1) of the output
//               gradient, with summed weights; source Hs×Ws even, output Hs/2 × Ws/2
// The output grid is Hs×Ws (same3x3, point1x1), 2Hs×2Ws (up2_*) or Hs/2×Ws/2 (down2_4x4).
enum class ConvShape : int { same3x3 = 0, point1x1 = 1, up2_parity = 2, down2_4x4 = 3, up2_subpixel = 4 };

// The block tile of a conv_igemm launch: GEMM rows × columns, pipeline stages. Which is
// fastest depends on the layer, the batch and the GPU (H100, batch 64: 128×128 for the
// encoder's 16×16 layers, 64×128 for the 8×8 ones; docs/GPU.md), so the GPU backend times
// the candidates per layer and batch (tune_conv_tile) and pins the fastest. Every tile sums
// each output's reduction in the same order, so the choice changes the speed, never a bit
// (tests/gpu/test_plan_gpu.cu). automatic: a fixed rule on the GEMM's size. The wgmma_*
// tiles run on Hopper's warpgroup MMA (conv_wgmma.cu) and are candidates only on devices
// of compute capability 9.0. im2col_pool is the first layer's own kernel (the 1×1 GEMM on
// the input's im2col with bias, ReLU and pool; conv_im2col_pool.cu), a candidate and the
// rule wherever it fits.
enum class ConvTile : int {
  automatic = 0, m64n128s2, m64n128s3, m128n128s3, m256n128s3, m128n256s3,
  wgmma_m128n128s4, wgmma_m128n128s3, wgmma_m64n128s4, im2col_pool,
};
// Whether the current device runs the wgmma_* tiles (compute capability 9.0: sm_90a code).
bool has_wgmma();
const char* conv_tile_name(ConvTile t);  // "128x128/3", "wgmma 64x128/4", …

struct ConvArgs {
  const void* src = nullptr;  // NHWC [images][Hs][Ws][Cs], Cs a power of two ≥ 8
  int images = 0, Hs = 0, Ws = 0, Cs = 0;  // any Hs, Ws ≥ 1; images·(output grid) ≤ 2^30
  ConvShape shape = ConvShape::same3x3;
  int Kpad = 0;                   // weights' row pitch (multiple of 64, ≥ taps·Cs)
  const void* weights = nullptr;  // [N][Kpad] ([4][N][Kpad] for up2_parity), element type as src
  int N = 0;                      // output channels
  ConvEpilogue epilogue = ConvEpilogue::store;
  const float* bias = nullptr;  // [N] fp32, may be null
  bool relu = false;
  void* out = nullptr;  // NHWC, element type as src
  int ldo = 0;          // out's channel pitch (≥ N; a multiple of 8 takes the vector epilogue)
  uint8_t* argmax_out = nullptr;       // pool
  const void* aux = nullptr;           // mask/unpool: the ReLU output that masks the gradient
  int ld_aux = 0;
  const uint8_t* argmax_in = nullptr;  // unpool (pitch ld_aux)
  float* out_nchw = nullptr;  // pool: fp32 NCHW copy of the pooled map (latent codes);
                              // loss: the reconstruction, fp32 NCHW
  // loss: the target images are uint8 NCHW [C][Ho][Wo], C = N (up2_subpixel: the N of
  // ConvArgs, i.e. the per-parity channels), Ho×Wo the output grid; image i of the batch
  // is images_u8[order[*order_pos + i]] (order null: images_u8[i]).
  const uint8_t* images_u8 = nullptr;
  const int* order = nullptr;
  const int* order_pos = nullptr;
  float grad_scale = 0.f;
  double* loss_sum = nullptr;
  ConvTile tile = ConvTile::automatic;
};
void conv_igemm(const ConvArgs& a, DType t, cudaStream_t stream);
// The tiles conv_igemm can run `a` with; empty where one kernel fits (at most 16 columns,
// the sub-pixel forms) or where a launch has side effects beyond its output (the loss).
std::vector<ConvTile> conv_tile_candidates(const ConvArgs& a);
// Runs `a` with every candidate tile (its outputs are overwritten), returns the fastest;
// automatic when there is nothing to choose. Synchronises `stream`: never inside a capture.
ConvTile tune_conv_tile(const ConvArgs& a, DType t, cudaStream_t stream);

// A [pixels][width] matrix read from an NHWC tensor, one row per pixel (img,y,x) of the
// reduction grid (any size):
//   plain:          the Cs channels at source pixel (y,x), or with parity_subsample at
//                   (2y+dy, 2x+dx) of the current parity (the source is then 2× the grid)
//   patch3:         the 3×3 neighbourhood (tap-major, width 9·Cs, zero padded)
//   patch3_flipped: the same with the taps mirrored (pixel (y+1−ky, x+1−kx) for tap ky,kx)
//   patch2_parity:  the 2×2 neighbourhood at origin (y+dy−1, x+dx−1) (width 4·Cs)
//   unpooled:       the backward of a 2×2 max pool, never written out: src is the gradient
//                   at the pooled grid (Hs×Ws = half the reduction grid, which is even), argmax its pick
//                   (0..3 = (y&1)·2 + (x&1), one byte per element, same layout); row (y,x)
//                   holds src at (y/2, x/2) where the pick is (y,x)'s position, else 0
// Patch kinds read the reduction grid itself (Hs×Ws = the grid).
struct PixelMatrix {
  enum Kind { plain, patch3, patch3_flipped, patch2_parity, unpooled };
  const void* src = nullptr;
  int Hs = 0, Ws = 0, Cs = 0;  // Cs: channel pitch, a power of two ≥ 8
  Kind kind = plain;
  bool parity_subsample = false;
  const uint8_t* argmax = nullptr;  // unpooled only
  int width() const { return kind == plain || kind == unpooled ? Cs : kind == patch2_parity ? 4 * Cs : 9 * Cs; }
};

// Weight gradient as a GEMM over pixels: out[i][j] = Σ_p A[p][i]·B[p][j] (both operands
// stream through shared memory transposed), per parity when parities = 4. Split over pixel
// ranges; the partial sums [parities][splits][Mp][Np] go to a workspace that
// wgrad_reduce() sums into the gradient.
// fp32 on a Hopper GPU, a plain A × a 3×3 patch B on a grid 16 pixels wide with channel
// pitches that are multiples of 128 (the seed model's encoder conv2): both operands are first
// copied channel-major into the workspace's tail (B three times, shifted by −1, 0, +1 pixel),
// and the GEMM runs on the tf32 warpgroup MMA (`channel_major`; docs/GPU.md, "Warpgroup MMA").
struct WgradPlan {
  int bm = 0, bn = 0, splits = 0, parities = 1, Mp = 0, Np = 0, pix_per_split = 0;
  int grid_h = 0, grid_w = 0;  // the reduction grid (any size)
  int64_t pixels = 0;          // images · grid_h · grid_w
  bool channel_major = false;
  int a_cs = 0, b_cs = 0;      // the operands' channel pitches (the copies' rows)
  size_t partial_floats() const { return size_t(parities) * splits * Mp * Np; }
  size_t workspace_floats() const {
    return partial_floats() + (channel_major ? size_t(a_cs + 3 * b_cs) * size_t(pixels) : 0);
  }
};
// max_splits caps the split count (a tuning knob for bench/, not an environment variable).
WgradPlan plan_wgrad(const PixelMatrix& a, const PixelMatrix& b, int images, int grid_h, int grid_w, int parities,
                     DType t, int max_splits = 256);
void wgrad_igemm(const PixelMatrix& a, const PixelMatrix& b, const WgradPlan& plan, float* workspace, DType t,
                 cudaStream_t stream);

// How the GEMM's (i, j) map to the flat gradient (PyTorch layout [K][C][3][3]).
struct WgradScatter {
  enum Mode {
    out_by_patch,         // i = k, j = tap·Cs + c (im2col: j = tap·C + c)
    in_by_flipped_patch,  // i = c, j = tap·Cs + k (B = patch3_flipped of the output gradient)
    out_by_parity_patch,  // per parity: i = k, j = (a·2+b)·Cs + c; summed into the 3×3 taps
  };
  Mode mode = out_by_patch;
  int K = 0, C = 0;  // real sizes
  int Cs = 0;        // patch pitch
  bool im2col = false;   // B is im2col_input()'s matrix: j = tap·C + c
  int bias_column = -1;  // im2col: column 9·C holds 1, its gradient is the bias's (else −1)
  float* weight_grad = nullptr;  // [K][C][9]
  float* bias_grad = nullptr;
};
void wgrad_reduce(const float* workspace, const WgradPlan& plan, const WgradScatter& s, cudaStream_t stream);

// The weight gradient of "nearest upsample ×2, then 3×3" with few output channels, on the
// low-resolution grid: dW[k][c][ky][kx] = Σ_q x[q][c]·G[q][(ky·3+kx)·K + k], where G sums
// the output gradient over the 2×2 output pixels whose tap (ky,kx) reads source pixel q.
// This makes the reduction 4× shorter and the source a plain operand (no upsampled
// reads): wgrad_igemm(plain x, plain G) + wgrad_reduce(in_by_flipped_patch, Cs = K).
// dy: NHWC [images][2H][2W][ldd]; g: [images][H][W][ldg], columns 9·K..ldg−1 zero. Any H, W.
void up2_fold_output_grad(const void* dy, int ldd, int K, int images, int H, int W, void* g, int ldg, DType t,
                          cudaStream_t stream);

// Bias gradient: out[c] = Σ_rows src[row][c] for c < ncols ≤ ld (src pitch ld, any power
// of two ≥ 8; src 16-byte aligned: rows are read as vectors of 8). work holds
// bias_grad_work_floats(ld) floats. The order of the sums depends on (rows, ld) only.
size_t bias_grad_work_floats(int ld);
void bias_grad(const void* src, int64_t rows, int ld, int ncols, float* work, float* out, DType t,
               cudaStream_t stream);

// The first layer's input as an im2col matrix [images·H·W][pitch] from uint8 NCHW images
// [C][H][W]: columns tap·C + c (tap = ky·3 + kx; pixels/255, zero outside the image),
// column 9·C = 1 (so the weight-gradient GEMM yields the bias gradient), columns
// 9·C+1..pitch−1 = 0. Image i is images_u8[order[*order_pos + ahead + i]] (order null: the
// i-th); with order_end set, the images at order positions ≥ *order_end are left out (their
// rows keep what they held): a training step gathers the next step's batch this way
// (docs/GPU.md, "The next batch's input"). pitch must be im2col_pitch(C); C ≤ 7 (the matrix
// then fits one 64-wide stage), else std::invalid_argument. The first convolution is then a
// 1×1 GEMM over it (point1x1, Kpad 64, weights PackKind::fwd_im2col).
int im2col_pitch(int C);  // the smallest power of two ≥ max(8, 9·C + 1)
void im2col_input(const uint8_t* images_u8, const int* order, const int* order_pos, int images, int C, int H,
                  int W, void* col, int pitch, DType t, cudaStream_t stream, int ahead = 0,
                  const int* order_end = nullptr);

// Packed weight copies the convolutions read, made from the fp32 master weights (in the
// GEMMs' element type) after every optimizer step:
//   fwd3    [K][kpad]: column tap·pitch + c                 = w[k][c][tap]
//   fwd_im2col [K][kpad]: column tap·C + c (9·C..kpad−1 zero) = w[k][c][tap] (pitch unused)
//   bwd3    [C][kpad]: column tap'·pitch + k                = w[k][c][8 − tap']
//   fwd_up2_parity [4][K][kpad]: column (a·2+b)·pitch + c   = Σ of the 3×3 taps that land on
//                   source pixel (y+dy+a−1, x+dx+b−1) for output parity (dy,dx)
//   fwd_up2_subpixel [4·K][kpad]: row par·K + k, column (a·3+b)·pitch + c = Σ of the 3×3
//                   taps of parity (dy,dx) that land on source pixel (y+a−1, x+b−1)
//   bwd_down2_4x4  [C][kpad]: column (a·4+b)·pitch + k      = Σ over (dy,ky), (dx,kx) with
//                   dy−ky+2 = a, dx−kx+2 = b of w[k][c][ky][kx]
// Columns c ≥ C (k ≥ K) of every tap are zero: pack_weights writes the elements the taps
// make and never that padding, so dst must have been zeroed once (PackedSet::allocate).
enum class PackKind : int { fwd3 = 0, fwd_im2col = 1, bwd3 = 2, fwd_up2_parity = 3, bwd_down2_4x4 = 4, fwd_up2_subpixel = 5 };
struct PackedWeights {
  PackKind kind = PackKind::fwd3;
  int64_t weight_offset = 0;  // into the flat params
  int K = 0, C = 0;
  void* dst = nullptr;
  int kpad = 0, pitch = 0;
  int64_t count() const {
    const int rows = (kind == PackKind::bwd3 || kind == PackKind::bwd_down2_4x4) ? C
                     : (kind == PackKind::fwd_up2_parity || kind == PackKind::fwd_up2_subpixel) ? 4 * K
                                                                                 : K;
    return int64_t(rows) * kpad;
  }
};
// One launch packs every item (a kernel parameter: kMax items, 4k+1 for k encoder blocks).
struct PackList {
  static constexpr int kMax = 32;
  int count = 0;
  PackedWeights item[kMax];
  void add(const PackedWeights& p) {
    if (count == kMax) throw std::length_error("PackList: more than 32 packed weight matrices");
    item[count++] = p;
  }
};
void pack_weights(const float* params, const PackList& list, DType t, cudaStream_t stream);

// Optimizer steps on the flat fp32 master params (PyTorch semantics). The step number t is *step_counter + 1; lr is read from device memory; with grad_clip
// > 0, grad_sumsq must point to Σ g² (grad_sumsq_compute()).
struct OptimizerDeviceState {
  float* params = nullptr;
  const float* grad = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const int64_t* step_counter = nullptr;
  const float* lr = nullptr;
  const double* grad_sumsq = nullptr;
};
void optimizer_update(const OptimizerConfig& cfg, const OptimizerDeviceState& s, int64_t count,
                      cudaStream_t stream);
void grad_sumsq_compute(const float* grad, int64_t count, double* out, cudaStream_t stream);
// *pos += batch; *step += 1 (the last kernel of a training step).
void advance_step(int* pos, int64_t* step, int batch, cudaStream_t stream);
// ae-encode's codes as a features file stores them: out[i] = codes[i] rounded to float16
// (IEEE binary16 bits; nearest, ties to even, as the host's cae::floats_to_halves), and
// first_bad[0] lowered to the least i whose code is not finite, first_bad[1] to the least i
// whose finite code is beyond float16's range (±Inf once rounded). The caller sets both to ~0.
void codes_to_halves(const float* codes, uint16_t* out, int64_t count, unsigned long long* first_bad,
                     cudaStream_t stream);

}  // namespace ae::cuda
