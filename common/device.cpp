#include "common/device.h"

#include <stdexcept>

#include "common/error.h"

#ifdef CIFARAE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cae {

const char* device_name(Device d) { return d == Device::gpu ? "gpu" : "cpu"; }

namespace {
std::string gpu_problem() {
#ifdef CIFARAE_WITH_CUDA
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) return std::string("no CUDA GPU found: ") + cudaGetErrorString(err);
  if (n == 0) return "no CUDA GPU found";
  return "";
#else
  return "this build has no CUDA support (rebuild on a machine with nvcc)";
#endif
}
}  // namespace

bool gpu_available() {
  static const bool ok = gpu_problem().empty();
  return ok;
}

int gpu_count() {
#ifdef CIFARAE_WITH_CUDA
  int n = 0;
  if (!gpu_available() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

std::string gpu_name() {
#ifdef CIFARAE_WITH_CUDA
  if (!gpu_available()) return "";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "";
  return prop.name;
#else
  return "";
#endif
}

Device resolve_device(const std::string& requested) {
  if (requested == "cpu") return Device::cpu;
  if (requested == "gpu") {
    std::string problem = gpu_problem();
    if (!problem.empty()) throw std::runtime_error("--device gpu: " + problem);
    return Device::gpu;
  }
  if (requested == "auto") return gpu_available() ? Device::gpu : Device::cpu;
  throw UsageError("--device must be auto, cpu or gpu, not '" + requested + "'");
}

}  // namespace cae
