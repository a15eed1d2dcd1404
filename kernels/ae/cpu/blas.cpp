// OpenBLAS set-up for the CPU kernels (see prepare_blas in kernels/ae/cpu/layers.h).
//
// Why the kernel selection: OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels
// from the CPU model number. 0.3.21 does not know recent Xeons (e.g. family 6 model 207)
// and falls back to "Prescott" SSE3 kernels: sgemm ran at 30 GFLOP/s per core on the
// development machine instead of ~150 with the AVX-512 (SkylakeX) kernels. We ask the CPU
// which instruction sets it has and, if the detected kernel set is weaker, re-run
// OpenBLAS's own selection with OPENBLAS_CORETYPE set — the documented override.
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/blas_runtime.h"
#include "kernels/ae/cpu/layers.h"

// OpenBLAS extensions, declared weak so the library still links against another BLAS.
extern "C" {
void openblas_set_num_threads(int num_threads) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace ae::cpu {
namespace {

void select_kernels() {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
  if (getenv("OPENBLAS_CORETYPE")) return;  // the user (or run_tool's re-exec) chose
  const char* best = cae::better_openblas_core();
  if (!best) return;
  setenv("OPENBLAS_CORETYPE", best, 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");  // not inherited by child processes
}

}  // namespace

void prepare_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    select_kernels();
    // We parallelise over images; BLAS threads inside our threads would oversubscribe.
    if (openblas_set_num_threads) openblas_set_num_threads(1);
  });
}

std::string blas_kernel_name() {
  prepare_blas();
  return openblas_get_corename ? std::string(openblas_get_corename()) : std::string();
}

}  // namespace ae::cpu
