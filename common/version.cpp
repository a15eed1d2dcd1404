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
// A build from a source tree without git history (a release tarball) knows its version
// but no commit: it says so by the version alone rather than "git unknown".
std::string version_line(const std::string& tool) {
  const std::string git = git_describe();
  const std::string commit = git.empty() || git == "unknown" ? "" : "git " + git + ", ";
  return tool + " " + version() + " (" + commit + (built_with_cuda() ? "CUDA" : "CPU only") + ")";
}
}  // namespace cae
