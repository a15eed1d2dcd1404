// CUDA error checking and a small owning device buffer, shared by every CUDA layer (the
// autoencoder's kernels and backend, the SVM's kernels) and the GPU tests: namespace
// cae::cuda, beside the project's other common code (cae). Every CUDA call's status is checked: a failure throws
// std::runtime_error naming the call, so tools print one clear line and exit 1.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/error.h"

namespace cae::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(err) + " (" + what + " at " +
                           file + ":" + std::to_string(line) + ")");
}

#define AE_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t ae_err_ = (call);                                                  \
    if (ae_err_ != cudaSuccess) ::cae::cuda::throw_cuda(ae_err_, #call, __FILE__, __LINE__); \
  } while (0)

// A failed device allocation of `bytes`: cae::OutOfDeviceMemory with the device's free memory,
// so the tool can say which option to lower instead of only "CUDA error: out of memory".
[[noreturn]] inline void throw_out_of_memory(size_t bytes) {
  (void)cudaGetLastError();  // an allocation failure is not sticky: clear it
  size_t free_b = 0, total_b = 0;
  char msg[160];
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    snprintf(msg, sizeof msg, "GPU out of memory: %.2f GiB more were needed with %.2f of %.2f GiB free", bytes / gib,
             free_b / gib, total_b / gib);
  else
    snprintf(msg, sizeof msg, "GPU out of memory: %.2f GiB more were needed", bytes / gib);
  throw cae::OutOfDeviceMemory(msg);
}

// After a kernel launch: catches bad launch configurations at once (asynchronous faults
// surface at the next synchronising call, which is checked too).
#define AE_CUDA_LAUNCH_CHECK() AE_CUDA_CHECK(cudaGetLastError())

// Owning device allocation (cudaMalloc). Allocated once, outside any training loop.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { resize(count); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  // Reallocates only when the buffer must grow; contents are not preserved.
  void resize(size_t count) {
    if (count <= count_ && ptr_) return;
    release();
    if (count == 0) return;
    const cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T));
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      if (err == cudaErrorMemoryAllocation) throw_out_of_memory(count * sizeof(T));
      throw_cuda(err, "cudaMalloc", __FILE__, __LINE__);
    }
    count_ = count;
  }
  void release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace cae::cuda
