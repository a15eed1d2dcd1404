// CUDA error checking, a small owning device buffer and page-locked host ranges for large
// uploads, shared by every CUDA layer (the autoencoder's kernels and backend, the SVM's
// kernels) and the GPU tests: namespace cae::cuda, beside the project's other common code
// (cae). Every CUDA call's status is checked: a failure throws
// std::runtime_error naming the call, so tools print one clear line and exit 1.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <map>
#include <mutex>
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

// Page-locked host memory of `count` T (cudaMallocHost), for small arrays copied every round
// of a loop: each copy is one transfer, and an asynchronous one.
template <typename T>
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t count) {
    if (count == 0) return;
    AE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  T* get() const { return ptr_; }
  T& operator[](size_t i) const { return ptr_[i]; }

 private:
  T* ptr_ = nullptr;
};

// Page-locks a large host range while it is copied to the device: the copies then run at the
// bus's speed instead of through the driver's pageable staging, several times slower, and
// locking and unlocking a gigabyte of huge pages (cae::LargeVector) costs far less than that
// wins: svm-fit's training rows go up in well under the pageable copy's time
// (docs/BENCHMARKS.md, "Large buffers, svm-fit's sliced write, background checkpoints,
// pinned uploads"). (svm-eval's support vectors went up faster too, but the tool was no shorter: it waits for
// the model's hash; docs/BENCHMARKS.md.) Small ranges are left alone, and where locking
// fails (a range already registered, a limit) the copies just stay pageable. Threads that
// lock the same range (the ranks of a group in one process share their rows) share one
// registration, released by the last of them: a copy the driver issued as page-locked never
// outlives the lock.
class PinnedRange {
 public:
  static constexpr size_t kMinBytes = size_t(64) << 20;
  PinnedRange(const void* p, size_t bytes) {
    if (bytes < kMinBytes) return;
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& users = registry()[p];
    if (users.count == 0) {
      if (cudaHostRegister(const_cast<void*>(p), bytes, cudaHostRegisterPortable) != cudaSuccess) {
        cudaGetLastError();  // not sticky: clear it
        registry().erase(p);
        return;
      }
      users.bytes = bytes;
    } else if (users.bytes != bytes) {
      return;  // another range from the same address: stay pageable
    }
    ++users.count;
    p_ = p;
  }
  ~PinnedRange() {
    if (!p_) return;
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(p_);
    if (--it->second.count == 0) {
      cudaHostUnregister(const_cast<void*>(p_));
      registry().erase(it);
    }
  }
  PinnedRange(const PinnedRange&) = delete;
  PinnedRange& operator=(const PinnedRange&) = delete;

 private:
  struct Users {
    size_t bytes = 0;
    int count = 0;
  };
  static std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<const void*, Users>& registry() {
    static std::map<const void*, Users> r;
    return r;
  }
  const void* p_ = nullptr;
};

}  // namespace cae::cuda
