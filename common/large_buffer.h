// Large host buffers: a std::vector allocator for the gigabyte arrays of the pipeline (a
// dataset split's images, a features split, a model's support vectors, the encoder's
// feature slots).
//
// resize() leaves the elements uninitialised, and a buffer of 64 MB or more is mapped on
// its own and asks for transparent huge pages. On the GPU hosts (VMs) first touching a gigabyte
// buffer in 4 KB pages cost many times the parallel read that fills it, and zero-filling a
// buffer beforehand touched every page on one thread: the pages are first touched by the
// threads that fill them (a parallel read or copy), in 2 MB pages where the kernel grants
// them (docs/DECISIONS.md, "Large buffers are left uninitialised and mapped in huge pages").
#pragma once
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace cae {

namespace detail {
constexpr size_t kHugePageBufferBytes = size_t(64) << 20;
void* map_huge_buffer(size_t bytes);  // throws std::bad_alloc
void unmap_huge_buffer(void* p, size_t bytes) noexcept;
}  // namespace detail

template <typename T>
struct LargeBufferAllocator {
  using value_type = T;
  LargeBufferAllocator() = default;
  template <typename U>
  LargeBufferAllocator(const LargeBufferAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) >= detail::kHugePageBufferBytes) return static_cast<T*>(detail::map_huge_buffer(n * sizeof(T)));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= detail::kHugePageBufferBytes) detail::unmap_huge_buffer(p, n * sizeof(T));
    else std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no zeroing for arithmetic types
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  friend bool operator==(const LargeBufferAllocator&, const LargeBufferAllocator&) { return true; }
  friend bool operator!=(const LargeBufferAllocator&, const LargeBufferAllocator&) { return false; }
};

// A vector whose resize(n) leaves new elements uninitialised; assign(n, v) and the
// initialiser-list forms still set every element.
template <typename T>
using LargeVector = std::vector<T, LargeBufferAllocator<T>>;

}  // namespace cae
