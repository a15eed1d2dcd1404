// Runtime settings of the two thread pools a compute tool mixes — OpenBLAS's and OpenMP's —
// applied inside the process, so no tool re-executes itself to set them. Variables the
// user set are left alone (set them to opt out).
//
//  * OMP_WAIT_POLICY=passive: between parallel regions libgomp's workers spin by default;
//    on a 2-core machine they then steal a core from OpenBLAS's threads in the very next
//    sgemm (svm-fit's kernel blocks took far longer). Passive workers sleep.
//    libgomp reads this only from the environment, once, when it initialises; the tools
//    link libgomp statically (Makefile) so that a constructor of this file, which runs
//    before libgomp's own, can set it.
//  * OPENBLAS_CORETYPE: OpenBLAS 0.3.21 (Debian 12) does not know recent Xeons (e.g. family 6
//    model 207) and falls back to its SSE3 "Prescott" kernels, a far slower sgemm than the
//    AVX-512 ones the CPU has (docs/DECISIONS.md, "OpenMP and OpenBLAS settings in-process;
//    libgomp linked statically"). When OpenBLAS reports such a fallback core on a CPU with
//    AVX-512 (AVX2), OpenBLAS's own selection is re-run with SkylakeX (Haswell) named.
//  * An address-space limit (ulimit -v, RLIMIT_AS: how SGE/PBS enforce memory): each
//    thread of OpenBLAS's pool maps a 128 MB buffer as it starts (the calling thread on its
//    first job) and, when that mmap fails, retries forever at 100 % CPU (OpenBLAS 0.3.21;
//    upstream issue #5289) — and a fork, which joins the pool, then never returns. Under a
//    limit, OpenBLAS's and OpenMP's thread counts (unless OPENBLAS_NUM_THREADS /
//    OMP_NUM_THREADS are set) are chosen so the buffers take at most half of it, and the
//    calling thread's buffer is mapped at start-up by one small sgemm, before the data
//    takes the room; a limit below kMinAddressSpaceMB, or one that leaves no room for every
//    pool thread's buffer beside what is mapped already (VmSize, the buffers mapped so far
//    counted once), ends the tool with one line. The pool is sized when OpenBLAS loads,
//    before any code of ours runs: under a tight limit on a many-core node, set
//    OPENBLAS_NUM_THREADS in the job script (docs/INSTALL.md).
#pragma once
#include <cstdint>

namespace cae {

// The smallest address-space limit a tool runs under (MB): the libraries and one
// OpenBLAS buffer.
inline constexpr uint64_t kMinAddressSpaceMB = 256;

// Threads that fit an address-space limit of `limit_mb` (see above), at most `hardware`,
// at least 1: OpenBLAS's buffers in half of what remains past the libraries' share.
int blas_threads_for_address_space(uint64_t limit_mb, int hardware);

// Called by run_tool() before anything else, so every tool gets it: the OpenBLAS settings
// above (thread count, kernel set, buffers), in-process. The OpenMP ones were applied
// before main().
void prepare_compute_environment(char** argv);

// The OpenBLAS core type this CPU should use when OpenBLAS fell back to a generic one
// ("SkylakeX" or "Haswell"), else nullptr.
const char* better_openblas_core();

// Re-runs OpenBLAS's kernel selection with better_openblas_core() when that names one and
// OPENBLAS_CORETYPE is unset; idempotent. Returns the core now in use.
const char* select_openblas_core();

}  // namespace cae
