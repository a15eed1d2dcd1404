// Optimizer steps and gradient clipping with PyTorch's semantics (torch 1.13,
// single-tensor code path), so a run here and a run in torch follow the same recurrences.
#include <algorithm>
#include <cmath>

#include "kernels/ae/cpu/parallel.h"
#include "kernels/ae/cpu/layers.h"

namespace ae::cpu {

void sgd_step(float* params, const float* grad, float* momentum_buf, int64_t count, float lr, float momentum,
              float weight_decay) {
#pragma omp parallel for schedule(static) if (worth_parallel(count))
  for (int64_t i = 0; i < count; ++i) {
    float g = grad[i];
    if (weight_decay != 0.0f) g += weight_decay * params[i];
    if (momentum != 0.0f) {
      momentum_buf[i] = momentum_buf[i] * momentum + g;
      g = momentum_buf[i];
    }
    params[i] += -lr * g;
  }
}

void adam_step(float* params, const float* grad, float* m, float* v, int64_t count, int64_t step, float lr,
               float beta1, float beta2, float eps, float weight_decay) {
  // Bias corrections in double, as PyTorch computes them in Python floats.
  const double bias_correction1 = 1.0 - std::pow(double(beta1), double(step));
  const double bias_correction2 = 1.0 - std::pow(double(beta2), double(step));
  const float step_size = static_cast<float>(double(lr) / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
#pragma omp parallel for schedule(static) if (worth_parallel(count))
  for (int64_t i = 0; i < count; ++i) {
    float g = grad[i];
    if (weight_decay != 0.0f) g += weight_decay * params[i];
    m[i] = m[i] * beta1 + g * (1.0f - beta1);
    v[i] = v[i] * beta2 + (1.0f - beta2) * g * g;
    const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    params[i] += -step_size * m[i] / denom;
  }
}

double global_norm(const float* grad, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += double(grad[i]) * grad[i];
  return std::sqrt(sum);
}

double clip_grad_norm(float* grad, int64_t count, float max_norm) {
  const double norm = global_norm(grad, count);
  const float coef = std::min(1.0f, static_cast<float>(double(max_norm) / (norm + 1e-6)));
  if (coef < 1.0f)
    for (int64_t i = 0; i < count; ++i) grad[i] *= coef;
  return norm;
}

}  // namespace ae::cpu
