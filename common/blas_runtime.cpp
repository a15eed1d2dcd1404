#include "common/blas_runtime.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace cae {

void use_best_openblas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE")) return;  // chosen by the user, or already re-executed
  const char* core = openblas_get_corename();
  if (!core) return;
  // Only the generic fallbacks are replaced; a core OpenBLAS recognised is left alone.
  const bool fallback = !strcmp(core, "Prescott") || !strcmp(core, "Core2") || !strcmp(core, "Nehalem") ||
                        !strcmp(core, "Sandybridge");
  if (!fallback) return;
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (!better || !strcmp(core, better)) return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the slow core
}

}  // namespace cae
