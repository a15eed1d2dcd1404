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

std::once_flag g_probe_started;
std::shared_future<std::string> g_probe;  // gpu_problem()'s answer

// A build without CUDA knows its answer: it asks on the caller's thread when the answer is
// first wanted. A thread there would buy nothing and would widen the window in which the
// HDF5 probe's fork() finds another thread mid-allocation (sanitizer builds, which have no
// CUDA: common/provenance.cpp).
#ifdef CIFARAE_WITH_CUDA
constexpr std::launch kProbeLaunch = std::launch::async;
#else
constexpr std::launch kProbeLaunch = std::launch::deferred;
#endif

// Asks the driver on a thread of its own, once per process.
const std::shared_future<std::string>& gpu_probe() {
  std::call_once(g_probe_started, [] { g_probe = std::async(kProbeLaunch, gpu_problem).share(); });
  return g_probe;
}

}  // namespace

bool gpu_available() { return gpu_probe().get().empty(); }

int gpu_count() {
#ifdef CIFARAE_WITH_CUDA
  int n = 0;
  if (!gpu_available() || cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
#else
  return 0;
#endif
}

DeviceChoice::DeviceChoice(const std::string& requested) : requested_(requested) {
  if (requested != "auto" && requested != "cpu" && requested != "gpu")
    throw UsageError("--device must be auto, cpu or gpu, not '" + requested + "'");
  if (may_use_gpu()) gpu_probe();
}

DeviceChoice::DeviceChoice(Device device) : DeviceChoice(std::string(device_name(device))) {}

Device DeviceChoice::get() const {
  if (requested_ == "cpu") return Device::cpu;
  const std::string& problem = gpu_probe().get();
  if (requested_ == "auto") return problem.empty() ? Device::gpu : Device::cpu;
  if (!problem.empty()) throw std::runtime_error("--device gpu: " + problem);
  return Device::gpu;
}

namespace {
std::once_flag g_context_started;
std::future<void> g_context;
}  // namespace

void start_gpu_context(int gpu) {
#ifdef CIFARAE_WITH_CUDA
  std::call_once(g_context_started, [gpu] {
    // cudaFree(nullptr) is the runtime's documented way to create the context and nothing else.
    g_context = std::async(std::launch::async, [gpu] {
      if (gpu_available() && cudaSetDevice(gpu) == cudaSuccess) cudaFree(nullptr);
    });
  });
#else
  (void)gpu;
#endif
}

void settle_gpu_context() {
  if (g_context.valid()) g_context.wait();
  // A probe no one waited for (a tool that failed on its input first) ends before exit too.
  if (g_probe.valid()) g_probe.wait();
}

}  // namespace cae
