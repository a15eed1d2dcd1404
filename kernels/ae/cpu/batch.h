// Runs a one-image layer (Conv3x3, UpConv3x3) over a batch: images split into contiguous
// blocks, one per OpenMP thread; weight gradients summed per thread, then added in thread
// order — so the same thread count always gives the same bits.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/ae/cpu/parallel.h"

namespace ae::cpu {

// Threads to split N images over: 1 inside a parallel region (the caller already split).
inline int batch_threads(int N) {
  return (!outside_parallel_region() || N <= 1) ? 1 : std::min(N, omp_get_max_threads());
}

// in/out: floats per image of the layer's input and output.
template <class Layer>
void batch_forward(const Layer& layer, const float* x, const float* b, float* y, int N, int64_t in, int64_t out,
                   bool relu) {
  const int threads = batch_threads(N);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int n = 0; n < N; ++n) layer.forward(x + n * in, b, y + n * out, relu);
}

// dx and/or (dw, db) may be null; x may be null when only dx is wanted.
template <class Layer>
void batch_backward(const Layer& layer, const float* x, const float* dy, float* dx, float* dw, float* db, int N,
                    int64_t in, int64_t out, bool accumulate) {
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

}  // namespace ae::cpu
