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
#pragma once

namespace cae {

// Called by run_tool() before anything else, so every tool gets it. Returns normally
// unless it re-executes the program.
void prepare_compute_environment(char** argv);

// The OpenBLAS core type this CPU should use when OpenBLAS fell back to a generic one
// ("SkylakeX" or "Haswell"), else nullptr. Library users that cannot re-execute (unit
// tests, benchmarks) apply it in-process: ae::cpu::prepare_blas().
const char* better_openblas_core();

}  // namespace cae
