// CUDA error checking and a small owning device buffer, shared by the CUDA kernels, the GPU
// backend and the GPU tests. Every CUDA call's status is checked: a failure throws
// std::runtime_error naming the call, so tools print one clear line and exit 1.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace ae::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(err) + " (" + what + " at " +
                           file + ":" + std::to_string(line) + ")");
}

#define AE_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    cudaError_t ae_err_ = (call);                                                  \
    if (ae_err_ != cudaSuccess) ::ae::cuda::throw_cuda(ae_err_, #call, __FILE__, __LINE__); \
  } while (0)

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
    AE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
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

}  // namespace ae::cuda
