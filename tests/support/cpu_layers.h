// Whole-batch CPU layer functions that only tests call: the forms the unit tests check
// against tests/support/layer_reference.h and finite differences, and the CPU twins the
// GPU layer tests (tests/gpu/) check every CUDA kernel against. Training runs one image at
// a time through Conv3x3 / UpConv3x3 (kernels/ae/cpu/conv2d.h, upconv.h) and the fused
// ReLU+pool of kernels/ae/cpu/layers.h; these wrap the same classes over a batch.
// They stay in namespace ae::cpu, beside the production layers they stand in for, and take
// the conventions of kernels/ae/cpu/layers.h (NCHW float32, H×W = the INPUT's size,
// outputs overwritten unless `accumulate`).
#pragma once
#include <cstdint>

#include "kernels/ae/cpu/layers.h"

namespace ae::cpu {

// ---- 3×3 convolution, stride 1, zero padding 1 (output size = input size) --------------
// w: [K,C,3,3] (PyTorch layout), b: [K]. y = conv(x, w) + b, then ReLU when `relu`.
// N > 1 splits the images over OpenMP threads outside a parallel region (serially inside
// one); the weight-gradient sum over images depends only on the thread count, so the same
// count always gives the same bits.
void conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C,
                     int K, int H, int W, bool relu);
// Gradient w.r.t. the input: dx[N,C,H,W] from dy[N,K,H,W] (the gradient of the
// convolution's output, after relu_backward when the layer has a ReLU).
void conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K,
                           int H, int W);
// dw[K,C,3,3] = Σ_n dy_n ⋆ x_n, db[K] = Σ_n Σ_hw dy_n; added to dw/db with `accumulate`.
// db may be null.
void conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N,
                              int C, int K, int H, int W, bool accumulate = false);
// Both gradients at once; dx may be null. Same semantics as the two functions above.
void conv3x3_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                      float* db, int N, int C, int K, int H, int W, bool accumulate = false);

// ---- nearest upsampling ×2 fused into the following 3×3 convolution (UpConv3x3) --------
// y [N,K,2H,2W] = conv3x3(upsample2(x), w) + b (+ReLU), from x [N,C,H,W].
void upconv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C,
                       int K, int H, int W, bool relu);
// dx [N,C,H,W]: the gradient w.r.t. the LOW-resolution input; dw, db as
// conv3x3_backward_weights. Any of dx / dw+db may be null (x may be null without dw, w
// may be null without dx).
void upconv3x3_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                        float* db, int N, int C, int K, int H, int W, bool accumulate = false);

// ---- the unfused layers the model is defined by ------------------------------------------
// 2×2 max pooling, stride 2: y [N,C,H/2,W/2]; argmax[i] = index within the input plane
// (h*W + w) of output i's maximum; ties go to the first element in row-major order, NaN
// wins (as PyTorch).
void maxpool2_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W);
// dx[N,C,H,W]: dy routed to the argmax positions, zero elsewhere.
void maxpool2_backward(const float* dy, const int32_t* argmax, float* dx, int N, int C, int H,
                       int W);
// Nearest-neighbour upsampling ×2: y[n,c,h,w] = x[n,c,h/2,w/2], y: [N,C,2H,2W].
void upsample2_forward(const float* x, float* y, int N, int C, int H, int W);
// dx[N,C,H,W] = the sum of the four dy elements each x element was copied to, in the order
// PyTorch's backward adds them (row-major over the output).
void upsample2_backward(const float* dy, float* dx, int N, int C, int H, int W);

// Mean squared error over `count` elements (accumulated in double); dpred (when not null)
// = 2 (pred - target) / count. The training backends take squared_error per image.
double mse_loss(const float* pred, const float* target, int64_t count, float* dpred);

}  // namespace ae::cpu
