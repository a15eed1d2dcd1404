// The CPU twins on device pointers (layer_twins.cuh): thin drivers of the production
// kernels, with the layout conversions and elementwise kernels only the tests need.
#include "tests/gpu/support/layer_twins.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/mma_ptx.cuh"
#include "kernels/ae/cuda/plan.h"

namespace gpu_test::twin {

using namespace ae::cuda;
using ae::OptimizerConfig;
using cae::cuda::DeviceBuffer;

namespace {

constexpr int kThreads = 256;
unsigned blocks_for(int64_t n) { return unsigned((n + kThreads - 1) / kThreads); }

using bf16 = __nv_bfloat16;
using ptx::load_f;
using ptx::store_f;

// ---- layout ------------------------------------------------------------------------------
// Element i of an NHWC tensor (HW pixels per image, pitch Cp) → image n, pixel p, channel c.
__device__ __forceinline__ void nhwc_index(int64_t i, int HW, int Cp, int& n, int& p, int& c) {
  c = int(i % Cp);
  const int64_t np = i / Cp;
  n = int(np / HW);
  p = int(np % HW);
}

template <typename T>
__global__ void nchw_to_nhwc_kernel(const float* __restrict__ x, T* __restrict__ y, int N, int C, int HW, int Cp) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(N) * HW * Cp) return;
  int n, p, c;
  nhwc_index(i, HW, Cp, n, p, c);
  store_f(y + i, c < C ? x[(size_t(n) * C + c) * HW + p] : 0.f);
}

// maxpool2_forward's argmax (index in the H×W input plane, NCHW over the pooled grid) as
// the pick bytes of PixelMatrix::unpooled: (h&1)·2 + (w&1), NHWC with channel pitch Cp.
__global__ void pool_pick_nhwc_kernel(const int32_t* __restrict__ argmax, uint8_t* __restrict__ pick, int N, int C,
                                      int pooled_pixels, int W, int Cp) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(N) * pooled_pixels * Cp) return;
  int n, p, c;
  nhwc_index(i, pooled_pixels, Cp, n, p, c);
  uint8_t v = 0;
  if (c < C) {
    const int a = argmax[(size_t(n) * C + c) * pooled_pixels + p];
    v = uint8_t((((a / W) & 1) << 1) | ((a % W) & 1));
  }
  pick[i] = v;
}

template <typename T>
__global__ void nhwc_to_nchw_kernel(const T* __restrict__ x, float* __restrict__ y, int N, int C, int HW, int Cp) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(N) * C * HW) return;
  const int p = int(i % HW);
  const int64_t nc = i / HW;
  const int c = int(nc % C), n = int(nc / C);
  y[i] = load_f(x + (size_t(n) * HW + p) * Cp + c);
}

// ---- the elementwise twins ---------------------------------------------------------------
__global__ void relu_backward_kernel(const float* dy, const float* y, float* dx, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

__global__ void maxpool2_forward_kernel(const float* x, float* y, int32_t* argmax, int NC, int H, int W) {
  const int Ho = H / 2, Wo = W / 2;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(NC) * Ho * Wo) return;
  const int wo = int(i % Wo), ho = int((i / Wo) % Ho);
  const int64_t plane = i / (int64_t(Ho) * Wo);
  const float* xp = x + plane * H * W;
  int best = (2 * ho) * W + 2 * wo;
  float bv = -INFINITY;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      const int idx = (2 * ho + a) * W + 2 * wo + b;
      const float v = xp[idx];
      if (v > bv || isnan(v)) best = idx, bv = v;
    }
  y[i] = bv;
  argmax[i] = best;
}

__global__ void maxpool2_backward_kernel(const float* dy, const int32_t* argmax, float* dx, int NC, int H, int W) {
  const int64_t out_plane = int64_t(H / 2) * (W / 2);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(NC) * out_plane) return;
  const int64_t plane = i / out_plane;
  atomicAdd(dx + plane * H * W + argmax[i], dy[i]);
}

__global__ void upsample2_forward_kernel(const float* x, float* y, int NC, int H, int W) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(NC) * 4 * H * W) return;
  const int w2 = int(i % (2 * W)), h2 = int((i / (2 * W)) % (2 * H));
  const int64_t plane = i / (int64_t(4) * H * W);
  y[i] = x[(plane * H + h2 / 2) * W + w2 / 2];
}

__global__ void upsample2_backward_kernel(const float* dy, float* dx, int NC, int H, int W) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(NC) * H * W) return;
  const int w = int(i % W), h = int((i / W) % H);
  const int64_t plane = i / (int64_t(H) * W);
  const float* d = dy + plane * 4 * H * W;
  dx[i] = d[(2 * h) * 2 * W + 2 * w] + d[(2 * h) * 2 * W + 2 * w + 1] + d[(2 * h + 1) * 2 * W + 2 * w] +
          d[(2 * h + 1) * 2 * W + 2 * w + 1];
}

__global__ void mse_kernel(const float* pred, const float* target, int64_t count, float* dpred, double* sum) {
  double local = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float d = pred[i] - target[i];
    local += double(d) * d;
    if (dpred) dpred[i] = 2.f * d / float(count);
  }
  for (int o = 16; o > 0; o >>= 1) local += __shfl_xor_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(sum, local);
}

__global__ void add_kernel(float* dst, const float* src, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

DType dtype_of(Precision p) { return p == Precision::bf16 ? DType::bf16 : DType::f32; }

void sync_default() {
  AE_CUDA_LAUNCH_CHECK();
  AE_CUDA_CHECK(cudaStreamSynchronize(0));
}

}  // namespace

void nchw_to_nhwc(const float* x, void* y, int N, int C, int HW, int Cp, DType t, cudaStream_t stream) {
  const int64_t n = int64_t(N) * HW * Cp;
  if (t == DType::bf16)
    nchw_to_nhwc_kernel<bf16><<<blocks_for(n), kThreads, 0, stream>>>(x, static_cast<bf16*>(y), N, C, HW, Cp);
  else
    nchw_to_nhwc_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(x, static_cast<float*>(y), N, C, HW, Cp);
  AE_CUDA_LAUNCH_CHECK();
}

void nhwc_to_nchw(const void* x, float* y, int N, int C, int HW, int Cp, DType t, cudaStream_t stream) {
  const int64_t n = int64_t(N) * C * HW;
  if (t == DType::bf16)
    nhwc_to_nchw_kernel<bf16><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const bf16*>(x), y, N, C, HW, Cp);
  else
    nhwc_to_nchw_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const float*>(x), y, N, C, HW, Cp);
  AE_CUDA_LAUNCH_CHECK();
}


// ---- CPU twins ---------------------------------------------------------------------------
namespace {

// Device scratch of one twin call: NHWC copies, packed weights, workspaces.
struct Scratch {
  DeviceBuffer<char> a, b, w, out;
};

void pack_one(const float* w, PackKind kind, int K, int C, void* dst, int kpad, int pitch, DType t) {
  PackList list;
  list.add(PackedWeights{kind, 0, K, C, dst, kpad, pitch});
  AE_CUDA_CHECK(cudaMemset(dst, 0, size_t(list.item[0].count()) * dtype_bytes(t)));  // pack_weights leaves the padding
  pack_weights(w, list, t, 0);
}

// One convolution pass of a twin on NCHW fp32 device arrays: the source is copied to NHWC
// (channel pitch a power of two), the fp32 weights packed as `kind` with `taps` taps per
// channel, the implicit GEMM run and its NHWC output copied back to NCHW.
struct TwinConv {
  const float* src;
  int src_channels, Hs, Ws;  // the map the GEMM gathers from
  ConvShape shape;
  const float* w;
  PackKind kind;
  int wK, wC;       // the PyTorch weight's [K][C][3][3]
  int taps;         // per source channel, in the packed weights
  int weight_sets;  // packed matrices (4 for the parity forms)
  int out_channels, out_pixels;  // per image
  const float* bias;
  bool relu;
};

void conv_twin(const TwinConv& c, float* out, int N, Precision precision) {
  const DType t = dtype_of(precision);
  const size_t es = dtype_bytes(t);
  // Pitches as the backend's: the vector epilogue, padding written as zeros.
  const int Cs = channel_pitch(c.src_channels), Kpad = packed_kpad(c.taps, Cs), src_pixels = c.Hs * c.Ws;
  const int ldo = channel_pitch(c.out_channels);
  Scratch s;
  s.a.resize(size_t(N) * src_pixels * Cs * es);
  s.w.resize(size_t(c.weight_sets) * c.out_channels * Kpad * es);
  s.out.resize(size_t(N) * c.out_pixels * ldo * es);
  nchw_to_nhwc(c.src, s.a.get(), N, c.src_channels, src_pixels, Cs, t, 0);
  pack_one(c.w, c.kind, c.wK, c.wC, s.w.get(), Kpad, Cs, t);
  ConvArgs a;
  a.src = s.a.get();
  a.images = N;
  a.Hs = c.Hs;
  a.Ws = c.Ws;
  a.Cs = Cs;
  a.shape = c.shape;
  a.Kpad = Kpad;
  a.weights = s.w.get();
  a.N = c.out_channels;
  a.bias = c.bias;
  a.relu = c.relu;
  a.out = s.out.get();
  a.ldo = ldo;
  conv_igemm(a, t, 0);
  nhwc_to_nchw(s.out.get(), out, N, c.out_channels, c.out_pixels, ldo, t, 0);
  sync_default();
}

WgradScatter scatter_of(WgradScatter::Mode mode, int K, int C, int Cs) { return WgradScatter{mode, K, C, Cs}; }

// Weight and bias gradients from NHWC operands already on the device.
void wgrad_twin(const PixelMatrix& A, const PixelMatrix& B, int images, int grid_h, int grid_w, int parities,
                WgradScatter s, const void* dy_nhwc, int64_t dy_rows, int Kp, float* dw, float* db, bool accumulate,
                DType t) {
  const WgradPlan plan = plan_wgrad(A, B, images, grid_h, grid_w, parities, t);
  DeviceBuffer<float> work(plan.workspace_floats()), tmp_w, tmp_b, bias_work(bias_grad_work_floats(Kp));
  wgrad_igemm(A, B, plan, work.get(), t, 0);
  const int64_t nw = int64_t(s.K) * s.C * 9;
  float* dw_out = dw;
  float* db_out = db;
  if (accumulate) {
    tmp_w.resize(size_t(nw));
    tmp_b.resize(size_t(s.K));
    dw_out = tmp_w.get();
    db_out = db ? tmp_b.get() : nullptr;
  }
  s.weight_grad = dw_out;
  wgrad_reduce(work.get(), plan, s, 0);
  if (db_out) bias_grad(dy_nhwc, dy_rows, Kp, s.K, bias_work.get(), db_out, t, 0);
  if (accumulate) {
    add_kernel<<<blocks_for(nw), kThreads>>>(dw, tmp_w.get(), nw);
    if (db) add_kernel<<<blocks_for(s.K), kThreads>>>(db, tmp_b.get(), s.K);
  }
  sync_default();
}

// dw, db of a 3×3 "same" convolution: the output-gradient operand dY (channel pitch Kp;
// dy_nhwc, dy_rows rows of it, for the bias) against the 3×3 patches of x (NHWC, pitch
// channel_pitch(C)).
void conv3x3_wgrad_twin(const PixelMatrix& dY, const void* x_nhwc, const void* dy_nhwc, int64_t dy_rows, int N, int C,
                        int K, int H, int W, float* dw, float* db, bool accumulate, DType t) {
  const int Cp = channel_pitch(C);
  const PixelMatrix B{x_nhwc, H, W, Cp, PixelMatrix::patch3, false};
  wgrad_twin(dY, B, N, H, W, 1, scatter_of(WgradScatter::out_by_patch, K, C, Cp), dy_nhwc, dy_rows, dY.Cs, dw, db,
             accumulate, t);
}

}  // namespace

void conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C, int K, int H, int W,
                     bool relu, Precision precision) {
  conv_twin({x, C, H, W, ConvShape::same3x3, w, PackKind::fwd3, K, C, 9, 1, K, H * W, b, relu}, y, N, precision);
}

void conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K, int H, int W,
                           Precision precision) {
  conv_twin({dy, K, H, W, ConvShape::same3x3, w, PackKind::bwd3, K, C, 9, 1, C, H * W, nullptr, false}, dx, N,
            precision);
}

void conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N, int C, int K, int H, int W,
                              bool accumulate, Precision precision) {
  const DType t = dtype_of(precision);
  const size_t es = dtype_bytes(t);
  const int Cp = channel_pitch(C), Kp = channel_pitch(K), HW = H * W;
  Scratch s;
  s.a.resize(size_t(N) * HW * Cp * es);
  s.b.resize(size_t(N) * HW * Kp * es);
  nchw_to_nhwc(x, s.a.get(), N, C, HW, Cp, t, 0);
  nchw_to_nhwc(dy, s.b.get(), N, K, HW, Kp, t, 0);
  const PixelMatrix dY{s.b.get(), H, W, Kp, PixelMatrix::plain, false};
  conv3x3_wgrad_twin(dY, s.a.get(), s.b.get(), int64_t(N) * HW, N, C, K, H, W, dw, db, accumulate, t);
}

void conv3x3_backward_weights_through_pool(const float* x, const float* dy, const int32_t* argmax, float* dw,
                                           float* db, int N, int C, int K, int H, int W, Precision precision) {
  const DType t = dtype_of(precision);
  const size_t es = dtype_bytes(t);
  const int Cp = channel_pitch(C), Kp = channel_pitch(K), HW = H * W, pooled = HW / 4;
  Scratch s;
  s.a.resize(size_t(N) * HW * Cp * es);
  s.b.resize(size_t(N) * pooled * Kp * es);
  s.w.resize(size_t(N) * pooled * Kp);
  nchw_to_nhwc(x, s.a.get(), N, C, HW, Cp, t, 0);
  nchw_to_nhwc(dy, s.b.get(), N, K, pooled, Kp, t, 0);
  const int64_t n_pick = int64_t(N) * pooled * Kp;
  pool_pick_nhwc_kernel<<<blocks_for(n_pick), kThreads>>>(argmax, reinterpret_cast<uint8_t*>(s.w.get()), N, K,
                                                          pooled, W, Kp);
  AE_CUDA_LAUNCH_CHECK();
  const PixelMatrix dY{s.b.get(), H / 2, W / 2, Kp, PixelMatrix::unpooled, false,
                       reinterpret_cast<const uint8_t*>(s.w.get())};
  // The bias gradient is the sum of dY over pixels, which unpooling leaves unchanged.
  conv3x3_wgrad_twin(dY, s.a.get(), s.b.get(), int64_t(N) * pooled, N, C, K, H, W, dw, db, false, t);
}

void upsample2_conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C, int K, int H,
                               int W, bool relu, bool output_layer, Precision precision) {
  const ConvShape shape = up2_forward_shape(K, output_layer);
  const bool subpixel = shape == ConvShape::up2_subpixel;
  const PackKind kind = subpixel ? PackKind::fwd_up2_subpixel : PackKind::fwd_up2_parity;
  conv_twin({x, C, H, W, shape, w, kind, K, C, subpixel ? 9 : 4, 4, K, 4 * H * W, b, relu}, y, N, precision);
}

void upsample2_conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K, int H, int W,
                                     Precision precision) {
  conv_twin({dy, K, 2 * H, 2 * W, ConvShape::down2_4x4, w, PackKind::bwd_down2_4x4, K, C, 16, 1, C, H * W, nullptr,
             false},
            dx, N, precision);
}

void upsample2_conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N, int C, int K,
                                        int H, int W, Precision precision) {
  const DType t = dtype_of(precision);
  const size_t es = dtype_bytes(t);
  const int Cp = channel_pitch(C), Kp = channel_pitch(K), HW = H * W;
  Scratch s;
  s.a.resize(size_t(N) * HW * Cp * es);
  s.b.resize(size_t(N) * 4 * HW * Kp * es);
  nchw_to_nhwc(x, s.a.get(), N, C, HW, Cp, t, 0);
  nchw_to_nhwc(dy, s.b.get(), N, K, 4 * HW, Kp, t, 0);
  if (up2_wgrad_folds(K)) {  // fold dY onto x's grid, one GEMM
    const int ldg = channel_pitch(9 * K);
    s.out.resize(size_t(N) * HW * ldg * es);
    up2_fold_output_grad(s.b.get(), Kp, K, N, H, W, s.out.get(), ldg, t, 0);
    PixelMatrix A{s.a.get(), H, W, Cp, PixelMatrix::plain, false};
    PixelMatrix B{s.out.get(), H, W, ldg, PixelMatrix::plain, false};
    wgrad_twin(A, B, N, H, W, 1, scatter_of(WgradScatter::in_by_flipped_patch, K, C, K), s.b.get(),
               int64_t(N) * 4 * HW, Kp, dw, db, false, t);
    return;
  }
  // per output parity: dY at (2y+dy, 2x+dx) against the 2×2 source neighbourhood
  PixelMatrix A{s.b.get(), 2 * H, 2 * W, Kp, PixelMatrix::plain, true};
  PixelMatrix B{s.a.get(), H, W, Cp, PixelMatrix::patch2_parity, false};
  wgrad_twin(A, B, N, H, W, 4, scatter_of(WgradScatter::out_by_parity_patch, K, C, Cp), s.b.get(),
             int64_t(N) * 4 * HW, Kp, dw, db, false, t);
}

void relu_backward(const float* dy, const float* y, float* dx, int64_t count) {
  relu_backward_kernel<<<blocks_for(count), kThreads>>>(dy, y, dx, count);
  sync_default();
}

void maxpool2_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W) {
  maxpool2_forward_kernel<<<blocks_for(int64_t(N) * C * (H / 2) * (W / 2)), kThreads>>>(x, y, argmax, N * C, H, W);
  sync_default();
}

void maxpool2_backward(const float* dy, const int32_t* argmax, float* dx, int N, int C, int H, int W) {
  AE_CUDA_CHECK(cudaMemset(dx, 0, sizeof(float) * size_t(N) * C * H * W));
  maxpool2_backward_kernel<<<blocks_for(int64_t(N) * C * (H / 2) * (W / 2)), kThreads>>>(dy, argmax, dx, N * C, H, W);
  sync_default();
}

void upsample2_forward(const float* x, float* y, int N, int C, int H, int W) {
  upsample2_forward_kernel<<<blocks_for(int64_t(N) * C * 4 * H * W), kThreads>>>(x, y, N * C, H, W);
  sync_default();
}

void upsample2_backward(const float* dy, float* dx, int N, int C, int H, int W) {
  upsample2_backward_kernel<<<blocks_for(int64_t(N) * C * H * W), kThreads>>>(dy, dx, N * C, H, W);
  sync_default();
}

double mse_loss(const float* pred, const float* target, int64_t count, float* dpred) {
  DeviceBuffer<double> sum(1);
  AE_CUDA_CHECK(cudaMemset(sum.get(), 0, sizeof(double)));
  mse_kernel<<<std::min<unsigned>(blocks_for(count), 1024), kThreads>>>(pred, target, count, dpred, sum.get());
  sync_default();
  double h = 0;
  AE_CUDA_CHECK(cudaMemcpy(&h, sum.get(), sizeof(double), cudaMemcpyDeviceToHost));
  return h / double(count);
}

namespace {
void run_optimizer_twin(const OptimizerConfig& cfg, float* params, const float* grad, float* m, float* v, int64_t count,
                        int64_t step) {
  DeviceBuffer<int64_t> d_step(1);
  DeviceBuffer<float> d_lr(1);
  const int64_t before = step - 1;
  AE_CUDA_CHECK(cudaMemcpy(d_step.get(), &before, sizeof(before), cudaMemcpyHostToDevice));
  AE_CUDA_CHECK(cudaMemcpy(d_lr.get(), &cfg.lr, sizeof(float), cudaMemcpyHostToDevice));
  OptimizerDeviceState s;
  s.params = params;
  s.grad = grad;
  s.m = m;
  s.v = v;
  s.step_counter = d_step.get();
  s.lr = d_lr.get();
  optimizer_update(cfg, s, count, 0);
  sync_default();
}
}  // namespace

void sgd_step(float* params, const float* grad, float* momentum_buf, int64_t count, float lr, float momentum,
              float weight_decay) {
  OptimizerConfig cfg;
  cfg.kind = "sgd";
  cfg.lr = lr;
  cfg.momentum = momentum_buf ? momentum : 0.f;
  cfg.weight_decay = weight_decay;
  run_optimizer_twin(cfg, params, grad, momentum_buf, nullptr, count, 1);
}

void adam_step(float* params, const float* grad, float* m, float* v, int64_t count, int64_t step, float lr,
               float beta1, float beta2, float eps, float weight_decay) {
  OptimizerConfig cfg;
  cfg.kind = "adam";
  cfg.lr = lr;
  cfg.beta1 = beta1;
  cfg.beta2 = beta2;
  cfg.eps = eps;
  cfg.weight_decay = weight_decay;
  run_optimizer_twin(cfg, params, grad, m, v, count, step);
}

double global_norm(const float* grad, int64_t count) {
  DeviceBuffer<double> sum(1);
  grad_sumsq_compute(grad, count, sum.get(), 0);
  sync_default();
  double h = 0;
  AE_CUDA_CHECK(cudaMemcpy(&h, sum.get(), sizeof(double), cudaMemcpyDeviceToHost));
  return std::sqrt(h);
}
}  // namespace gpu_test::twin
