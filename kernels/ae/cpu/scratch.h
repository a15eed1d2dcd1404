// Per-thread scratch memory for the CPU kernels. Buffers grow to the largest size asked
// for and are kept for the thread's lifetime, so the training loop allocates (and
// page-faults) nothing after its first step. OpenMP's worker threads persist between
// parallel regions, so they keep their buffers too.
#pragma once
#include <cstdint>
#include <vector>

namespace ae::cpu {

inline constexpr int kScratchSlots = 4;

// A buffer of at least `count` floats, distinct per slot and per thread. Contents are
// unspecified; the pointer stays valid until the same thread asks the same slot for more.
inline float* scratch(int slot, int64_t count) {
  thread_local std::vector<float> buffers[kScratchSlots];
  std::vector<float>& b = buffers[slot];
  if (b.size() < static_cast<size_t>(count)) b.resize(static_cast<size_t>(count));
  return b.data();
}

}  // namespace ae::cpu
