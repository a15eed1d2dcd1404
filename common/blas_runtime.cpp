#include "common/blas_runtime.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace cae {

const char* better_openblas_core() {
  const char* core = openblas_get_corename();
  if (!core) return nullptr;
  // Only the generic fallbacks are replaced; a core OpenBLAS recognised is left alone.
  const bool fallback = !strcmp(core, "Prescott") || !strcmp(core, "Core2") || !strcmp(core, "Nehalem") ||
                        !strcmp(core, "Sandybridge");
  if (!fallback) return nullptr;
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  return better && strcmp(core, better) != 0 ? better : nullptr;
}

void prepare_compute_environment(char** argv) {
  bool changed = false;
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    if (const char* core = better_openblas_core()) {
      setenv("OPENBLAS_CORETYPE", core, 1);
      changed = true;
    }
  }
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    changed = true;
  }
  // Both variables are set now, so the new image does not come back here to re-execute.
  if (changed) execv("/proc/self/exe", argv);  // returns only on failure: carry on as we are
}

}  // namespace cae
