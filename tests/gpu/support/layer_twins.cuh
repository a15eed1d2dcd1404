// The GPU twins of the CPU layers of tests/support/cpu_layers.h (included below): the same
// names and arguments as those ae::cpu functions, on DEVICE pointers, NCHW float32, plus the precision the convolutions compute
// in. Each runs the production kernels of kernels/ae/cuda (conv_igemm, wgrad_igemm,
// pack_weights, optimizer_update, ...) the way the backend's plan does (the shape, packing
// and weight-gradient decisions are plan.h's: packed_kpad, up2_forward_shape,
// up2_wgrad_folds) and is checked against its CPU twin by tests/gpu/test_layers_gpu.cu.
// They allocate scratch, convert layouts and synchronise: test support, not for a
// training loop. Also the layout conversions the GPU tests use (NCHW fp32 ↔ NHWC).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/ae/backend.h"
#include "kernels/ae/cuda/ops.cuh"
// The CPU side every twin is checked against (ae::cpu, whole batches).
#include "tests/support/cpu_layers.h"

namespace gpu_test::twin {

using ae::Precision;

// Convolutions run as implicit GEMM on tensor cores: Precision::fp32 uses TF32 operands
// with fp32 accumulation, Precision::bf16 rounds operands to bf16 (fp32 accumulation).
void conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C, int K,
                     int H, int W, bool relu, Precision precision = Precision::fp32);
void conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K, int H,
                           int W, Precision precision = Precision::fp32);
void conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N, int C,
                              int K, int H, int W, bool accumulate = false,
                              Precision precision = Precision::fp32);
// dw, db of a convolution followed by a 2×2 max pool, from the gradient at the pool's output
// (dy: [N,K,H/2,W/2], any ReLU mask already applied) and the pool's argmax (as
// maxpool2_forward writes it): the unpooled gradient is gathered inside the weight-gradient
// GEMM and never written out (the backend's first encoder layer).
void conv3x3_backward_weights_through_pool(const float* x, const float* dy, const int32_t* argmax, float* dw,
                                           float* db, int N, int C, int K, int H, int W,
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

// Fused twins of "nearest upsample ×2, then 3×3 convolution" (x: [N,C,H,W], y: [N,K,2H,2W]),
// checked against ae::cpu::upsample2_forward + conv3x3_*; the backend runs them this way.
// output_layer: the model's last layer, whose forward takes the form the plan gives it
// (ae::cuda::up2_forward_shape: the sub-pixel GEMM for at most 4 channels).
void upsample2_conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C,
                               int K, int H, int W, bool relu, bool output_layer,
                               Precision precision = Precision::fp32);
// dx [N,C,H,W] = upsample2_backward(conv3x3_backward_data(dy)), dy: [N,K,2H,2W]
void upsample2_conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K,
                                     int H, int W, Precision precision = Precision::fp32);
// dw, db of the convolution in "upsample then conv" (x: the pre-upsample input)
void upsample2_conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N,
                                        int C, int K, int H, int W, Precision precision = Precision::fp32);

// NCHW fp32 ↔ NHWC at channel pitch Cp (padding written as zero), stream-ordered.
void nchw_to_nhwc(const float* x, void* y, int N, int C, int HW, int Cp, ae::cuda::DType t, cudaStream_t stream);
void nhwc_to_nchw(const void* x, float* y, int N, int C, int HW, int Cp, ae::cuda::DType t, cudaStream_t stream);

}  // namespace gpu_test::twin
