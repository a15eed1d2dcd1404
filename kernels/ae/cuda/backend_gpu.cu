// The GPU backend's factories (the backend itself: backend_gpu.cuh).
#include <memory>

#include "kernels/ae/backend.h"
#include "kernels/ae/cuda/backend_gpu.cuh"

namespace ae {

std::unique_ptr<AeBackend> make_gpu_backend(const Architecture& arch, const OptimizerConfig& opt, Precision precision) {
  return std::make_unique<cuda::GpuBackend>(arch, opt, precision);
}

std::unique_ptr<AeBackend> make_gpu_backend(const Architecture& arch, const OptimizerConfig& opt, Precision precision,
                                            const DataParallelGroup& group) {
  return std::make_unique<cuda::GpuBackend>(arch, opt, precision, &group);
}

}  // namespace ae
