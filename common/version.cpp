#include "common/version.h"

#ifndef CIFARAE_VERSION
#define CIFARAE_VERSION "0.0.0"
#endif
#ifndef CIFARAE_GIT_DESCRIBE
#define CIFARAE_GIT_DESCRIBE "unknown"
#endif

namespace cae {
const char* version() { return CIFARAE_VERSION; }
const char* git_describe() { return CIFARAE_GIT_DESCRIBE; }
bool built_with_cuda() {
#ifdef CIFARAE_WITH_CUDA
  return true;
#else
  return false;
#endif
}
std::string version_line(const std::string& tool) {
  return tool + " " + version() + " (git " + git_describe() + (built_with_cuda() ? ", CUDA" : ", CPU only") + ")";
}
}  // namespace cae
