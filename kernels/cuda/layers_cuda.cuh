// The autoencoder's layers on the GPU (namespace ae::cuda).
//
// Two levels:
//
// 1. The CPU twins: the same names and arguments as kernels/layers.h (ae::cpu), on DEVICE
//    pointers, NCHW float32, plus the precision the convolutions compute in. Each is
//    checked against its CPU twin by tests/gpu/. They allocate scratch and convert layouts,
//    so they are for tests and one-off use, not for the training loop.
//
// 2. The fused NHWC operations the GPU backend (autoencoder_gpu.cu) runs every step:
//    implicit-GEMM convolution with fused epilogues (bias+ReLU, 2×2 max pool, upsample-sum
//    and ReLU mask of the backward pass, max-unpool, MSE loss), implicit-GEMM weight
//    gradients with a split-K reduction, and the small kernels around them. Activations
//    are NHWC ("channels last") with a power-of-two channel pitch; weights are packed
//    [out][tap][in] so that the GEMM's reduction index k = tap·C + c reads contiguous
//    channels. See docs/GPU.md for the design.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/autoencoder.h"

namespace ae::cuda {

// ---- CPU twins (device pointers, NCHW float32) -----------------------------------------
// Convolutions run as implicit GEMM on tensor cores: Precision::fp32 uses TF32 operands
// with fp32 accumulation, Precision::bf16 rounds operands to bf16 (fp32 accumulation).
void conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C, int K,
                     int H, int W, bool relu, Precision precision = Precision::fp32);
void conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K, int H,
                           int W, Precision precision = Precision::fp32);
void conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N, int C,
                              int K, int H, int W, bool accumulate = false,
                              Precision precision = Precision::fp32);
void relu_backward(const float* dy, const float* y, float* dx, int64_t count);
void maxpool2_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W);
void maxpool2_backward(const float* dy, const int32_t* argmax, float* dx, int N, int C, int H, int W);
void upsample2_forward(const float* x, float* y, int N, int C, int H, int W);
void upsample2_backward(const float* dy, float* dx, int N, int C, int H, int W);
double mse_loss(const float* pred, const float* target, int64_t count, float* dpred);
void sgd_step(float* params, const float* grad, float* momentum_buf, int64_t count, float lr,
              float momentum, float weight_decay);
void adam_step(float* params, const float* grad, float* m, float* v, int64_t count, int64_t step,
               float lr, float beta1, float beta2, float eps, float weight_decay);
double global_norm(const float* grad, int64_t count);

// ---- fused NHWC operations (stream-ordered, no allocation, no synchronisation) ---------
enum class DType { f32, bf16 };
inline size_t dtype_bytes(DType t) { return t == DType::bf16 ? 2 : 4; }

// Raises the shared-memory limit of the GEMM kernels (once per process). Called by the
// entry points below; call it yourself before capturing them into a CUDA graph.
void init_kernels();

enum class ConvEpilogue : int {
  store = 0,        // out[pixel][n] = act(acc + bias); channels N..ldo-1 written as 0
  pool = 1,         // 2×2 max pool of act(acc + bias) → out (H/2×W/2) + argmax (0..3)
  upsum_mask = 2,   // backward of "upsample then conv": sum of each 2×2 block, × (aux > 0)
  unpool_mask = 3,  // backward of "conv then ReLU then pool": acc × (aux > 0) routed to the
                    //   argmax position of a 2H×2W output, zeros elsewhere
  loss = 4,         // MSE against the uint8 input: Σ(out − x/255)² into loss_sum, gradient
                    //   grad_scale·(out − x/255) into out (ldo channels, pad zeroed)
};

// 3×3 (taps = 9, zero padding 1) or 1×1 (taps = 1: src is already an im2col matrix)
// convolution as an implicit GEMM: rows = output pixels, columns = output channels,
// reduction k = tap·Cs + c gathered on the fly from the NHWC source. The source is seen
// upsampled ×`up` (nearest), so "upsample then conv" never materialises the upsampled map.
struct ConvArgs {
  const void* src = nullptr;  // NHWC [images][Hs][Ws][Cs], Cs a power of two ≥ 8
  int images = 0, Hs = 0, Ws = 0, Cs = 0, up = 1;
  int taps = 9;
  int Kpad = 0;                  // weights' row pitch (multiple of 32, ≥ taps·Cs)
  const void* weights = nullptr;  // [N][Kpad], same element type as src
  int N = 0;                     // output channels
  ConvEpilogue epilogue = ConvEpilogue::store;
  const float* bias = nullptr;  // [N] fp32, may be null
  bool relu = false;
  void* out = nullptr;  // NHWC, element type as src (upsum/unpool/loss too)
  int ldo = 0;          // out's channel pitch
  uint8_t* argmax_out = nullptr;         // pool
  const void* aux = nullptr;             // upsum/unpool: ReLU output that masks the gradient
  int ld_aux = 0;
  const uint8_t* argmax_in = nullptr;    // unpool (pitch ld_aux)
  float* out_nchw = nullptr;  // pool: fp32 NCHW copy of the pooled map (latent codes);
                              // loss: the reconstruction, fp32 NCHW
  // loss: the target images (uint8 NCHW) are images_u8[order[*order_pos + i]] (order null:
  // images_u8[i]).
  const uint8_t* images_u8 = nullptr;
  const int* order = nullptr;
  const int* order_pos = nullptr;
  float grad_scale = 0.f;
  double* loss_sum = nullptr;
};
void conv_igemm(const ConvArgs& a, DType t, cudaStream_t stream);

// A [pixels][width] matrix read from an NHWC tensor over a pixel grid of
// (Hs·up)×(Ws·up): plain (row p = the Cs channels of pixel p) or patch (row p = the 3×3
// neighbourhood of pixel p, tap-major, width 9·Cs, zero padded, source upsampled ×up).
struct PixelMatrix {
  const void* src = nullptr;
  int Hs = 0, Ws = 0, Cs = 0, up = 1;
  bool patch = false;
  int width() const { return patch ? 9 * Cs : Cs; }
};

// Weight gradient as a GEMM over pixels: out[i][j] = Σ_p A[p][i]·B[p][j] (both operands
// stream through shared memory transposed). Split over pixel ranges; the partial sums
// [splits][Mp][Np] go to a workspace that wgrad_reduce() sums and scatters.
struct WgradPlan {
  int bm = 0, bn = 0, splits = 0, Mp = 0, Np = 0, pix_per_split = 0;
  int64_t pixels = 0;
  size_t workspace_floats() const { return size_t(splits) * Mp * Np; }
};
WgradPlan plan_wgrad(int M, int N, int64_t pixels, DType t, int max_splits = 64);
void wgrad_igemm(const PixelMatrix& a, const PixelMatrix& b, int images, const WgradPlan& plan,
                 float* workspace, DType t, cudaStream_t stream);

// Where a weight-gradient matrix lands in the flat gradient (PyTorch layout [K][C][3][3]).
struct WgradScatter {
  bool a_is_channels = true;  // A's columns are output channels k (else B's are)
  int K = 0, C = 0;           // real sizes
  int Cs = 0;                 // patch pitch: column j = tap·Cs + c
  bool rgb_im2col = false;    // columns are the im2col of the RGB input: j = tap·3 + c
  int bias_column = -1;       // this patch column holds the bias gradient (rgb: 27)
  float* weight_grad = nullptr;  // [K][C][9]
  float* bias_grad = nullptr;
};
void wgrad_reduce(const float* workspace, const WgradPlan& plan, int M, int N, const WgradScatter& s,
                  cudaStream_t stream);

// Bias gradient: out[c] = Σ_rows src[row][c] for c < ncols (src pitch ld, a power of two
// ≤ 256). work holds bias_grad_work_floats(ld) floats.
size_t bias_grad_work_floats(int ld);
void bias_grad(const void* src, int64_t rows, int ld, int ncols, float* work, float* out, DType t,
               cudaStream_t stream);

// The first layer's input as an im2col matrix [images·32·32][32] with columns tap·3 + c
// (pixels/255, zero padded), column 27 = 1 (so the weight-gradient GEMM yields the bias
// gradient) and columns 28..31 = 0. Image i is images_u8[order[*order_pos + i]].
void im2col_rgb(const uint8_t* images_u8, const int* order, const int* order_pos, int images,
                void* col, DType t, cudaStream_t stream);

// The layout of every layer's packed weight copies, so the optimizer can refresh them as
// it updates the fp32 master weights.
struct PackedLayer {
  int64_t weight_offset = 0;  // into the flat params
  int K = 0, C = 0;
  void* fwd = nullptr;  // [K][kpad_fwd]: column tap·cs_fwd + c (rgb: tap·3 + c)
  int kpad_fwd = 0, cs_fwd = 0;
  bool rgb = false;
  void* bwd = nullptr;  // [C][kpad_bwd]: column tap'·kp_bwd + k holds w[k][c][8 − tap'] (null: none)
  int kpad_bwd = 0, kp_bwd = 0;
};
struct PackTable {
  PackedLayer layer[kNumConvs];
};
// Writes every packed copy from the fp32 master params (padding must be zeroed once).
void pack_all(const float* params, const PackTable& table, DType t, cudaStream_t stream);

// Optimizer steps on the flat fp32 master params that also refresh the packed copies.
// The step number t is *step_counter + 1; lr is read from device memory; with grad_clip
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
                      const PackTable& table, DType t, cudaStream_t stream);
void grad_sumsq_compute(const float* grad, int64_t count, double* out, cudaStream_t stream);
// *pos += batch; *step += 1 (the last kernel of a training step).
void advance_step(int* pos, int64_t* step, int batch, cudaStream_t stream);

// Layout conversions used by the twins and tests: NCHW fp32 ↔ NHWC (pitch Cp, pad zero).
void nchw_to_nhwc(const float* x, void* y, int N, int C, int HW, int Cp, DType t, cudaStream_t stream);
void nhwc_to_nchw(const void* x, float* y, int N, int C, int HW, int Cp, DType t, cudaStream_t stream);

// Runs one training step of a GPU backend kernel by kernel, timing each with CUDA events,
// and returns a table (stage, ms, GFLOP, TFLOP/s). The backend must come from
// make_gpu_backend and have training images set.
std::string profile_training_step(AeBackend& backend, int batch, int repeats = 20);

}  // namespace ae::cuda
