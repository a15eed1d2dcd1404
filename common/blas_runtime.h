// OpenBLAS picks its kernels from the CPU model at load time. OpenBLAS 0.3.21 (Debian 12)
// does not know recent Xeons (e.g. family 6 model 207) and falls back to its "Prescott"
// SSE3 kernels, which run sgemm ~5x slower than the AVX-512 ones this CPU supports.
// OPENBLAS_CORETYPE overrides the choice, but only before the library initialises, i.e.
// before main(); so a tool that finds the fallback core on a CPU with AVX2/AVX-512 sets the
// variable and re-executes itself once. Set OPENBLAS_CORETYPE yourself to opt out.
#pragma once

namespace cae {

// Call first thing in main(). Returns normally unless it re-executes the program.
void use_best_openblas_core(char** argv);

}  // namespace cae
