#include "tests/support/cpu_layers.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/ae/cpu/conv2d.h"
#include "kernels/ae/cpu/parallel.h"
#include "kernels/ae/cpu/upconv.h"
#include "tests/support/layer_reference.h"

namespace ae::cpu {

namespace {

// Threads to split N images over: 1 inside a parallel region (the caller already split).
int batch_threads(int N) { return (!outside_parallel_region() || N <= 1) ? 1 : std::min(N, omp_get_max_threads()); }

// A one-image layer (Conv3x3, UpConv3x3) over a batch: images split into contiguous blocks,
// one per OpenMP thread; weight gradients summed per thread, then added in thread order —
// so the same thread count always gives the same bits. out_scale: output pixels per input
// pixel (4 for UpConv3x3, whose output is 2H × 2W).
template <class Layer>
struct Batch {
  Layer layer;
  int N;
  int64_t in, out;  // floats per image of the layer's input and output

  Batch(const float* w, int n, int C, int K, int H, int W, int out_scale)
      : layer(C, K, H, W), N(n), in(int64_t(C) * H * W), out(int64_t(K) * out_scale * H * W) {
    prepare_blas();
    if (w) layer.set_weights(w);  // only the input gradient needs the weights
  }

  void forward(const float* x, const float* b, float* y, bool relu) const {
    const int threads = batch_threads(N);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int n = 0; n < N; ++n) layer.forward(x + n * in, b, y + n * out, relu);
  }

  // dx and/or (dw, db) may be null; x may be null when only dx is wanted.
  void backward(const float* x, const float* dy, float* dx, float* dw, float* db, bool accumulate) const {
    const bool want_weights = dw || db;
    const int threads = batch_threads(N);
    const int64_t work_size = layer.grad_work_size();
    std::vector<float> work(want_weights ? static_cast<size_t>(threads * work_size) : 0, 0.0f);
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      const int tid = threads > 1 ? omp_get_thread_num() : 0;
      const int n0 = static_cast<int>(int64_t(N) * tid / threads), n1 = static_cast<int>(int64_t(N) * (tid + 1) / threads);
      float* my_work = want_weights ? work.data() + tid * work_size : nullptr;
      for (int n = n0; n < n1; ++n)
        layer.backward(x ? x + n * in : nullptr, dy + n * out, dx ? dx + n * in : nullptr, my_work);
    }
    if (!want_weights) return;
    for (int t = 1; t < threads; ++t)  // fixed order: thread 0 + thread 1 + ...
      for (int64_t i = 0; i < work_size; ++i) work[i] += work[t * work_size + i];
    layer.finish_weight_grad(work.data(), dw, db, accumulate);
  }
};

}  // namespace

void conv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C, int K, int H, int W,
                     bool relu) {
  Batch<Conv3x3>(w, N, C, K, H, W, 1).forward(x, b, y, relu);
}

void conv3x3_backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, int N, int C,
                      int K, int H, int W, bool accumulate) {
  Batch<Conv3x3>(w, N, C, K, H, W, 1).backward(x, dy, dx, dw, db, accumulate);
}

void conv3x3_backward_data(const float* dy, const float* w, float* dx, int N, int C, int K, int H, int W) {
  conv3x3_backward(nullptr, w, dy, dx, nullptr, nullptr, N, C, K, H, W, false);
}

void conv3x3_backward_weights(const float* x, const float* dy, float* dw, float* db, int N, int C, int K, int H,
                              int W, bool accumulate) {
  conv3x3_backward(x, nullptr, dy, nullptr, dw, db, N, C, K, H, W, accumulate);
}

void upconv3x3_forward(const float* x, const float* w, const float* b, float* y, int N, int C, int K, int H, int W,
                       bool relu) {
  Batch<UpConv3x3>(w, N, C, K, H, W, 4).forward(x, b, y, relu);
}

void upconv3x3_backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, int N, int C,
                        int K, int H, int W, bool accumulate) {
  Batch<UpConv3x3>(w, N, C, K, H, W, 4).backward(x, dy, dx, dw, db, accumulate);
}

// The unfused pool and upsampling are the reference's loops in float: the same scan order,
// tie and NaN rules and summation order the training's fused kernels follow.
void maxpool2_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W) {
  ref::maxpool2_forward(x, y, argmax, N, C, H, W);
}

void maxpool2_backward(const float* dy, const int32_t* argmax, float* dx, int N, int C, int H, int W) {
  ref::maxpool2_backward(dy, argmax, dx, N, C, H, W);
}

void upsample2_forward(const float* x, float* y, int N, int C, int H, int W) {
  ref::upsample2_forward(x, y, N, C, H, W);
}

void upsample2_backward(const float* dy, float* dx, int N, int C, int H, int W) {
  ref::upsample2_backward(dy, dx, N, C, H, W);
}

double mse_loss(const float* pred, const float* target, int64_t count, float* dpred) {
  if (count <= 0) return 0.0;
  return squared_error(pred, target, count, dpred, static_cast<float>(2.0 / double(count))) / double(count);
}

}  // namespace ae::cpu
