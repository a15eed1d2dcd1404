// Runtime settings of the two thread pools a compute tool mixes — OpenBLAS's and OpenMP's —
// that can only be given through the environment before the libraries initialise, i.e.
// before main(). prepare_compute_environment() sets what is missing and re-executes the
// program once; variables the user set are left alone (set them to opt out).
//
//  * OPENBLAS_CORETYPE: OpenBLAS 0.3.21 (Debian 12) does not know recent Xeons (e.g. family 6
//    model 207) and falls back to its SSE3 "Prescott" kernels, ~5x slower sgemm than the
//    AVX-512 ones the CPU has. When OpenBLAS reports such a fallback core on a CPU with
//    AVX-512 (AVX2), SkylakeX (Haswell) is chosen instead.
//  * OMP_WAIT_POLICY=passive: between parallel regions libgomp's workers spin by default;
//    on a 2-core machine they then steal a core from OpenBLAS's threads in the very next
//    sgemm (measured: svm-fit's kernel blocks take 2x longer). Passive workers sleep.
//  * An address-space limit (ulimit -v, RLIMIT_AS: how SGE/PBS enforce memory): each
//    OpenBLAS thread maps a 128 MB buffer on its first job and, when that mmap fails,
//    retries forever at 100 % CPU (OpenBLAS 0.3.21; upstream issue #5289). Under a limit,
//    OPENBLAS_NUM_THREADS and OMP_NUM_THREADS (when unset) are chosen so the buffers take
//    at most half of it, and every buffer is mapped at start-up by one small sgemm, before
//    the data takes the room; a limit below kMinAddressSpaceMB ends the tool with one line.
#pragma once
#include <cstdint>

namespace cae {

// The smallest address-space limit a tool runs under (MB): the libraries and one
// OpenBLAS buffer.
inline constexpr uint64_t kMinAddressSpaceMB = 256;

// Threads that fit an address-space limit of `limit_mb` (see above), at most `hardware`,
// at least 1: OpenBLAS's buffers in half of what remains past the libraries' share.
int blas_threads_for_address_space(uint64_t limit_mb, int hardware);

// Called by run_tool() before anything else, so every tool gets it. Returns normally
// unless it re-executes the program.
void prepare_compute_environment(char** argv);

// The OpenBLAS core type this CPU should use when OpenBLAS fell back to a generic one
// ("SkylakeX" or "Haswell"), else nullptr. Library users that cannot re-execute (unit
// tests, benchmarks) apply it in-process: ae::cpu::prepare_blas().
const char* better_openblas_core();

}  // namespace cae
