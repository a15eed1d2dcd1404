#include "common/cublas_runtime.h"

#include "common/device.h"
#include "common/group.h"

#ifdef CIFARAE_WITH_CUDA
#include <dlfcn.h>

#include <future>
#include <mutex>
#include <stdexcept>
#include <string>

namespace cae::cublas {
namespace {

// The soname of the cuBLAS this build was compiled against; dlopen finds it through the
// executable's run path (the toolkit's lib64, or $ORIGIN/../lib of a bundle) or
// LD_LIBRARY_PATH, as the linker would have.
const std::string kLibrary = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);

template <class F>
void bind(void* lib, const char* symbol, F& to) {
  void* p = dlsym(lib, symbol);
  if (!p) throw std::runtime_error("cuBLAS: " + kLibrary + " has no " + symbol);
  to = reinterpret_cast<F>(p);
}

Api load() {
  void* lib = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw std::runtime_error("cannot load cuBLAS (" + kLibrary + "), which the GPU SVM needs: " +
                             (why ? why : "not found") + "; use --device cpu, or put the CUDA toolkit's lib64 on "
                             "LD_LIBRARY_PATH");
  }
  Api a{};
  bind(lib, "cublasCreate_v2", a.create);
  bind(lib, "cublasDestroy_v2", a.destroy);
  bind(lib, "cublasSetStream_v2", a.set_stream);
  bind(lib, "cublasSetMathMode", a.set_math_mode);
  bind(lib, "cublasGetStatusString", a.status_string);
  bind(lib, "cublasSgemm_v2", a.sgemm);
  bind(lib, "cublasDgemm_v2", a.dgemm);
  bind(lib, "cublasGemmEx", a.gemm_ex);
  return a;  // the library stays loaded for the life of the process
}

std::once_flag g_started, g_preload_started;
std::shared_future<Api> g_api;
std::future<void> g_preload;

void start() {
  std::call_once(g_started, [] { g_api = std::async(std::launch::async, load).share(); });
}

}  // namespace

void preload(const DeviceChoice& device, int gpu) {
  if (!device.may_use_gpu()) return;
  start_gpu_context(gpu);
  // After the driver's answer, also for --device gpu: mapping cuBLAS's ~700 MB beside the
  // driver's start slowed both (the tools' start-up: docs/DECISIONS.md, "cuBLAS loaded at run
  // time (dlopen)"), and --device auto loads nothing where there is no GPU.
  std::call_once(g_preload_started, [] {
    g_preload = std::async(std::launch::async, [] {
      if (gpu_available()) start();
    });
  });
}

void settle() {
  if (g_preload.valid()) g_preload.wait();
  if (g_api.valid()) g_api.wait();
}

const Api& api() {
  start();
  return g_api.get();  // rethrows load()'s error on every call
}

}  // namespace cae::cublas
#else
namespace cae::cublas {
void preload(const DeviceChoice&, int) {}
void settle() {}
}  // namespace cae::cublas
#endif

namespace cae::cublas {
void preload(const DeviceChoice& device, const GroupPlace& place) {
  if (!place.grouped()) preload(device, 0);
  else if (device.get() == Device::gpu) preload(device, select_group_gpu(place.local_rank));
}
}  // namespace cae::cublas
