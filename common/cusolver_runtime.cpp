#include "common/cusolver_runtime.h"

#ifdef CIFARAE_WITH_CUDA
#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace cae::cusolver {
namespace {

// The soname of the cuSOLVER this build was compiled against, found as cuBLAS's is
// (common/cublas_runtime.cpp).
const std::string kLibrary = "libcusolver.so." + std::to_string(CUSOLVER_VER_MAJOR);

template <class F>
void bind(void* lib, const char* symbol, F& to) {
  void* p = dlsym(lib, symbol);
  if (!p) throw std::runtime_error("cuSOLVER: " + kLibrary + " has no " + symbol);
  to = reinterpret_cast<F>(p);
}

Api load() {
  void* lib = dlopen(kLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw std::runtime_error("cannot load cuSOLVER (" + kLibrary + "), which the GPU's Nyström features need: " +
                             (why ? why : "not found") + "; use --device cpu, or put the CUDA toolkit's lib64 on "
                             "LD_LIBRARY_PATH");
  }
  Api a{};
  bind(lib, "cusolverDnCreate", a.create);
  bind(lib, "cusolverDnDestroy", a.destroy);
  bind(lib, "cusolverDnSetStream", a.set_stream);
  bind(lib, "cusolverDnDsyevd_bufferSize", a.dsyevd_buffer_size);
  bind(lib, "cusolverDnDsyevd", a.dsyevd);
  bind(lib, "cusolverDnDpotrf_bufferSize", a.dpotrf_buffer_size);
  bind(lib, "cusolverDnDpotrf", a.dpotrf);
  bind(lib, "cusolverDnDpotrs", a.dpotrs);
  return a;  // the library stays loaded for the life of the process
}

}  // namespace

const Api& api() {
  static std::once_flag once;
  static Api loaded;
  static std::string error;
  std::call_once(once, [] {
    try {
      loaded = load();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw std::runtime_error(error);
  return loaded;
}

}  // namespace cae::cusolver
#endif
