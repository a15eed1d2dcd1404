#include "tests/support/cpu_gradient.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/ae/cpu/backend_cpu.h"

namespace ae {

double cpu_loss_and_gradient(const Architecture& arch, const std::vector<float>& params, const uint8_t* images, int n,
                             int threads, float* outputs, float* grad) {
  if (n <= 0) throw std::invalid_argument("cpu_loss_and_gradient: needs at least one image");
  CpuBackend backend(arch, OptimizerConfig{}, threads);
  backend.set_params(params);
  backend.set_train_images(images, n);
  std::vector<int64_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  const double loss_sum = backend.compute_gradient(order.data(), n, outputs);
  std::copy(backend.gradient().begin(), backend.gradient().end(), grad);
  return loss_sum / n;
}

std::vector<ForwardTrace> cpu_forward_traces(const Architecture& arch, const std::vector<float>& params,
                                             const uint8_t* images, int n) {
  CpuBackend backend(arch, OptimizerConfig{}, 1);
  backend.set_params(params);
  CpuBackend::Workspace ws(arch);
  std::vector<ForwardTrace> traces;
  for (int i = 0; i < n; ++i) {
    backend.load_image(images + int64_t(i) * arch.image_dim(), ws);
    backend.forward(ws);
    traces.push_back(ForwardTrace{ws.arg, ws.p, ws.a});
  }
  return traces;
}

}  // namespace ae
