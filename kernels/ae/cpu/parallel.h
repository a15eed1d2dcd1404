// When an element-wise CPU kernel should fork OpenMP threads: only outside a parallel
// region (the training backend already runs one image per thread) and only when there is
// enough work to pay for the fork.
#pragma once
#include <omp.h>

#include <cstdint>

namespace ae::cpu {
// omp_get_level() rather than omp_in_parallel(): a one-thread team is not "active", but
// forking inside it would still start threads behind the caller's back.
inline bool outside_parallel_region() { return omp_get_level() == 0; }
inline bool worth_parallel(int64_t elements) { return elements >= (int64_t(1) << 15) && outside_parallel_region(); }
}  // namespace ae::cpu
