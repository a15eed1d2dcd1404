// Squared error and ReLU backward.
#include "kernels/ae/cpu/parallel.h"
#include "kernels/ae/cpu/layers.h"

namespace ae::cpu {

double squared_error(const float* pred, const float* target, int64_t count, float* dpred, float grad_scale) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const float d = pred[i] - target[i];
    sum += double(d) * d;
    if (dpred) dpred[i] = grad_scale * d;
  }
  return sum;
}

void relu_backward(const float* dy, const float* y, float* dx, int64_t count) {
#pragma omp parallel for schedule(static) if (worth_parallel(count))
  for (int64_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace ae::cpu
