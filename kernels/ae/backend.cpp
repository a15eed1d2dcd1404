#include "kernels/ae/backend.h"

namespace ae {

std::unique_ptr<AeBackend> make_backend(cae::Device device, const Architecture& arch, const OptimizerConfig& opt,
                                        Precision precision, int threads, const DataParallelGroup& group) {
  if (device != cae::Device::gpu) return make_cpu_backend(arch, opt, threads);
  if (group.world > 1 || !group.rendezvous.empty()) return make_gpu_backend(arch, opt, precision, group);
  return make_gpu_backend(arch, opt, precision);
}

}  // namespace ae
