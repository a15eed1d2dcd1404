// Without CUDA the GPU entry point exists but says clearly why it cannot run; the tools
// normally stop earlier, in cae::DeviceChoice::get().
#ifndef CIFARAE_WITH_CUDA
#include <stdexcept>

#include "kernels/ae/backend.h"

namespace ae {
std::unique_ptr<AeBackend> make_gpu_backend(const Architecture&, const OptimizerConfig&, Precision) {
  throw std::runtime_error("--device gpu: this build has no CUDA support (rebuild on a machine with nvcc)");
}
std::unique_ptr<AeBackend> make_gpu_backend(const Architecture&, const OptimizerConfig&, Precision,
                                            const DataParallelGroup&) {
  throw std::runtime_error("multi-GPU training: this build has no CUDA support (rebuild on a machine with nvcc)");
}
}  // namespace ae
#endif
