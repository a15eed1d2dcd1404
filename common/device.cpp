#include "common/device.h"

#include <cstdlib>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>

#include "common/error.h"

#ifdef CIFARAE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cae {

const char* device_name(Device d) { return d == Device::gpu ? "gpu" : "cpu"; }

namespace {

#ifdef CIFARAE_WITH_CUDA
// "12.4" from CUDA's 12040.
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
#endif

// Why --device gpu cannot run here, in the user's terms, or "" when it can. The CUDA
// runtime reports a host without an NVIDIA driver as cudaErrorInsufficientDriver ("CUDA
// driver version is insufficient for CUDA runtime version"), which reads as an old driver;
// cudaDriverGetVersion tells the two apart (it gives 0 when libcuda.so.1 cannot be
// loaded), so a missing driver, an old driver and a driver without a GPU each get their
// own words. Only asked when a GPU is wanted (--device gpu or auto): the CPU path never
// touches CUDA.
std::string gpu_problem() {
#ifdef CIFARAE_WITH_CUDA
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  if (driver == 0)
    return "no CUDA GPU found: this host has no NVIDIA driver (libcuda.so.1 is not installed); install the "
           "driver or use --device cpu";
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaErrorInsufficientDriver)
    return "no CUDA GPU found: the NVIDIA driver supports CUDA " + cuda_version_text(driver) +
           " but this build needs CUDA " + cuda_version_text(runtime) + "; update the driver or use --device cpu";
  if (err == cudaErrorNoDevice || (err == cudaSuccess && n == 0)) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no CUDA GPU found: the NVIDIA driver (CUDA ") + cuda_version_text(driver) + ") sees no GPU" +
           (visible ? std::string(" (CUDA_VISIBLE_DEVICES='") + visible + "')" : std::string());
  }
  if (err != cudaSuccess) return std::string("no CUDA GPU found: ") + cudaGetErrorString(err);
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

namespace {
std::once_flag g_context_started;
std::future<void> g_context;
}  // namespace

void start_gpu_context() {
#ifdef CIFARAE_WITH_CUDA
  std::call_once(g_context_started, [] {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return;
    // cudaFree(nullptr) is the runtime's documented way to create the context and nothing else.
    g_context = std::async(std::launch::async, [device] {
      if (cudaSetDevice(device) == cudaSuccess) cudaFree(nullptr);
    });
  });
#endif
}

void settle_gpu_context() {
  if (g_context.valid()) g_context.wait();
}

}  // namespace cae
