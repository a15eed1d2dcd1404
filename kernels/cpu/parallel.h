// When an element-wise CPU kernel should fork OpenMP threads: only outside a parallel
// region (the training backend already runs one image per thread) and only when there is
// enough work to pay for the fork.
#pragma once
#include <omp.h>

#include <cstdint>

namespace ae::cpu {
inline bool worth_parallel(int64_t elements) { return elements >= (int64_t(1) << 15) && !omp_in_parallel(); }
}  // namespace ae::cpu
