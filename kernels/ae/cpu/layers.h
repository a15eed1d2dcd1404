// The autoencoder's layers on the CPU: forward and backward of every layer, the loss and
// the optimizer steps. The CUDA twins in kernels/ae/cuda/ (namespace ae::cuda) have the same
// names and arguments, so every GPU kernel is checked against the function here.
//
// Conventions, shared by every function:
//   - Tensors are float32, NCHW, contiguous: x[((n*C + c)*H + h)*W + w].
//   - N = images, C = input channels, K = output channels, H×W = the INPUT's spatial size
//     (for pooling the output is H/2 × W/2, for upsampling 2H × 2W).
//   - Outputs are overwritten, never accumulated into, unless an `accumulate` flag says so.
//   - Functions taking N > 1 split the images over OpenMP threads when called outside a
//     parallel region, and run serially inside one (the training backend calls them per
//     image from its own threads). Results depend on the thread count only through the
//     order of the weight-gradient sum over images, which is fixed for a given count:
//     the same thread count always gives bit-identical results.
//
// A readable direct-loop reference of every layer lives in kernels/ae/cpu/reference.h; the
// unit tests check these fast versions against it and against finite differences.
#pragma once
#include <cstdint>
#include <string>

namespace ae::cpu {

// ---- 3×3 convolution, stride 1, zero padding 1 (output size = input size) --------------
// w: [K,C,3,3] (PyTorch layout), b: [K]. y = conv(x, w) + b, then ReLU when `relu`.
void conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C,
                     int K, int H, int W, bool relu);

// Gradient w.r.t. the input: dx[N,C,H,W] from dy[N,K,H,W] (dy is the gradient of the
// convolution's output, i.e. after relu_backward when the layer has a ReLU).
void conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K,
                           int H, int W);

// Gradients w.r.t. the weights and bias, summed over the N images:
// dw[K,C,3,3] = Σ_n dy_n ⋆ x_n, db[K] = Σ_n Σ_hw dy_n. With `accumulate` the sums are
// added to dw/db instead of overwriting them. db may be null.
void conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N,
                              int C, int K, int H, int W, bool accumulate = false);

// Both gradients at once (shares the rearranged dy between them); dx may be null (the
// first layer needs no input gradient). Same semantics as the two functions above.
void conv3x3_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                      float* db, int N, int C, int K, int H, int W, bool accumulate = false);

// ---- nearest upsampling ×2 fused into the following 3×3 convolution -----------------------
// y [N,K,2H,2W] = conv3x3(upsample2(x), w) + b (+ReLU), from x [N,C,H,W] — without building
// the upsampled tensor, and with 4/9 of the multiply-adds (kernels/ae/cpu/upconv.h explains
// the four 2×2 phase kernels). Equal to upsample2_forward then conv3x3_forward up to
// float rounding.
void upconv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C,
                       int K, int H, int W, bool relu);
// Its backward: dx [N,C,H,W] is the gradient w.r.t. the LOW-resolution input (conv
// backward followed by upsample2_backward); dw, db as conv3x3_backward_weights. Any of
// dx / dw+db may be null (x may be null without dw, w may be null without dx).
void upconv3x3_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                        float* db, int N, int C, int K, int H, int W, bool accumulate = false);

// ---- ReLU ------------------------------------------------------------------------------
// dx = dy where y > 0, else 0 (y is the ReLU's OUTPUT, as PyTorch's threshold_backward).
// dx may alias dy.
void relu_backward(const float* dy, const float* y, float* dx, int64_t count);

// ---- 2×2 max pooling, stride 2 (H, W even) ---------------------------------------------
// y: [N,C,H/2,W/2]. argmax[i] = index within the input plane (h*W + w) of the maximum of
// output element i; ties go to the first element in row-major order, NaN wins (as PyTorch).
void maxpool2_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W);
// dx[N,C,H,W]: dy routed to the argmax positions, zero elsewhere.
void maxpool2_backward(const float* dy, const int32_t* argmax, float* dx, int N, int C, int H,
                       int W);

// relu(maxpool2(x)) — equal to maxpool2(relu(x)) — from a convolution's pre-activation:
// the ReLU runs on the 4× smaller output. argmax as maxpool2_forward on x (where every
// window value is <= 0 it may differ from PyTorch's pick among the ReLU's zeros, but the
// gradient there is zero either way).
void maxpool2_relu_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W);
// Its backward: dx = dy routed to argmax where the pooled output y > 0, zero elsewhere.
void maxpool2_relu_backward(const float* dy, const int32_t* argmax, const float* y, float* dx, int N,
                            int C, int H, int W);

// ---- nearest-neighbour upsampling ×2 ---------------------------------------------------
// y[n,c,h,w] = x[n,c,h/2,w/2]; y: [N,C,2H,2W].
void upsample2_forward(const float* x, float* y, int N, int C, int H, int W);
// dx[N,C,H,W] = sum of the four dy elements each x element was copied to.
void upsample2_backward(const float* dy, float* dx, int N, int C, int H, int W);

// ---- loss ------------------------------------------------------------------------------
// Mean squared error over `count` elements (accumulated in double). When dpred is not
// null it receives d(loss)/d(pred) = 2 (pred - target) / count.
double mse_loss(const float* pred, const float* target, int64_t count, float* dpred);
// The building block for per-image use: returns Σ (pred - target)² and, when dpred is not
// null, sets dpred = grad_scale · (pred - target). mse_loss = this with 2/count, / count.
double squared_error(const float* pred, const float* target, int64_t count, float* dpred,
                     float grad_scale);

// ---- optimizers (PyTorch semantics) ----------------------------------------------------
// torch.optim.SGD (dampening 0, no Nesterov): g += weight_decay·p;
// buf = momentum·buf + g (buf starts at zero, which equals PyTorch's first-step copy);
// p -= lr·buf. With momentum 0, `momentum_buf` may be null and p -= lr·g.
void sgd_step(float* params, const float* grad, float* momentum_buf, int64_t count, float lr,
              float momentum, float weight_decay);

// torch.optim.Adam (amsgrad off): g += weight_decay·p; m = β1 m + (1-β1) g;
// v = β2 v + (1-β2) g²; p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps).
// `step` is t, counted from 1 (the step being taken).
void adam_step(float* params, const float* grad, float* m, float* v, int64_t count,
               int64_t step, float lr, float beta1, float beta2, float eps, float weight_decay);

// L2 norm of a gradient vector (accumulated in double).
double global_norm(const float* grad, int64_t count);
// torch.nn.utils.clip_grad_norm_: when norm > max_norm, scales grad by
// max_norm / (norm + 1e-6). Returns the norm before clipping.
double clip_grad_norm(float* grad, int64_t count, float max_norm);

// ---- BLAS ------------------------------------------------------------------------------
// Called by every function above before its first GEMM; idempotent and thread-safe.
// Pins OpenBLAS to one thread (we parallelise over images) and, when OpenBLAS's runtime
// CPU detection does not know this CPU (0.3.21 falls back to generic SSE3 kernels on
// recent Xeons, 4-5x slower), selects the AVX-512 or AVX2 kernels the CPU supports.
// An OPENBLAS_CORETYPE set by the user is always respected.
void prepare_blas();
// The OpenBLAS kernel set in use, e.g. "SkylakeX" ("" for another BLAS).
std::string blas_kernel_name();

}  // namespace ae::cpu
