// The autoencoder's element-wise layers on the CPU — the ReLU+pool of the encoder, the ReLU
// backward, the loss — and the optimizer steps, as the training backend
// (kernels/ae/cpu/backend_cpu.cpp) calls them. The convolutions are the one-image classes
// of conv2d.h and upconv.h. Whole-batch forms of every layer (and the unfused pool,
// upsampling and MSE the model is defined by) exist for the tests only, in
// tests/support/cpu_layers.h: the CPU twins every GPU kernel is checked against.
//
// Conventions, shared by every function:
//   - Tensors are float32, NCHW, contiguous: x[((n*C + c)*H + h)*W + w].
//   - N = images, C = channels, H×W = the INPUT's spatial size (the pool's output is
//     H/2 × W/2).
//   - Outputs are overwritten, never accumulated into.
//   - Element-wise functions split the work over OpenMP threads when called outside a
//     parallel region with enough of it, and run serially inside one (the training
//     backend calls them per image from its own threads); their results do not depend on
//     the thread count.
//
// A readable direct-loop reference of every layer lives in tests/support/layer_reference.h;
// the unit tests check these fast versions against it and against finite differences.
#pragma once
#include <cstdint>
#include <string>

namespace ae::cpu {

// ---- ReLU ------------------------------------------------------------------------------
// dx = dy where y > 0, else 0 (y is the ReLU's OUTPUT, as PyTorch's threshold_backward).
// dx may alias dy.
void relu_backward(const float* dy, const float* y, float* dx, int64_t count);

// ---- 2×2 max pooling, stride 2 (H, W even), fused with the ReLU before it -------------
// relu(maxpool2(x)) — equal to maxpool2(relu(x)) — from a convolution's pre-activation:
// the ReLU runs on the 4× smaller output. y: [N,C,H/2,W/2]. argmax[i] = index within the
// input plane (h*W + w) of the maximum of x in output i's window; ties go to the first
// element in row-major order, NaN wins (as PyTorch's max pool). Where every window value
// is <= 0 it may differ from PyTorch's pick among the ReLU's zeros, but the gradient there
// is zero either way.
void maxpool2_relu_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W);
// Its backward: dx = dy routed to argmax where the pooled output y > 0, zero elsewhere.
void maxpool2_relu_backward(const float* dy, const int32_t* argmax, const float* y, float* dx, int N,
                            int C, int H, int W);

// ---- loss ------------------------------------------------------------------------------
// Returns Σ (pred - target)² (accumulated in double) and, when dpred is not null, sets
// dpred = grad_scale · (pred - target): the mean squared error of one image is this / count
// with grad_scale 2/count (the backend scales per batch).
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
// Called before the first GEMM of a Conv3x3 / UpConv3x3 (the backend does when it builds
// them); idempotent and thread-safe.
// Pins OpenBLAS to one thread (we parallelise over images) and, when OpenBLAS's runtime
// CPU detection does not know this CPU (0.3.21 falls back to generic SSE3 kernels on
// recent Xeons: common/blas_runtime.h; docs/DECISIONS.md, "OpenMP and OpenBLAS settings
// in-process; libgomp linked statically"), selects the AVX-512 or AVX2 kernels the CPU supports.
// An OPENBLAS_CORETYPE set by the user is always respected.
void prepare_blas();
// The OpenBLAS kernel set in use, e.g. "SkylakeX" ("" for another BLAS).
std::string blas_kernel_name();

}  // namespace ae::cpu
