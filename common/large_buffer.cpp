#include "common/large_buffer.h"

#include <sys/mman.h>

namespace cae::detail {

void* map_huge_buffer(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without THP the buffer is plain pages
  return p;
}

void unmap_huge_buffer(void* p, size_t bytes) noexcept { munmap(p, bytes); }

}  // namespace cae::detail
