// The libsvm text readers size their dense matrices from the indices a file declares, up to
// half of what the process may allocate (common/memory_limit.h). On a large machine that is
// gigabytes from a few bytes of input: legitimate, but past libFuzzer's -malloc_limit_mb and
// slow to zero. An address-space limit of 512 MB beyond what the sanitizers have mapped at
// start (as `ulimit -v` would be) bounds them at 256 MB and fuzzes that refusal path too.
// tests/unit/test_libsvm_hostile.cpp sets its limits in forked children with the same call.
#pragma once
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace fuzz {

// RLIMIT_AS at what the process maps now plus `spare` bytes (never raised).
inline int limit_address_space(uint64_t spare = uint64_t{512} << 20) {
  std::ifstream status("/proc/self/status");
  uint64_t vm_kb = 0;
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoull(line.substr(7));
  struct rlimit lim;
  if (vm_kb == 0 || getrlimit(RLIMIT_AS, &lim) != 0) return 0;
  const rlim_t want = static_cast<rlim_t>(vm_kb) * 1024 + static_cast<rlim_t>(spare);
  if (lim.rlim_cur == RLIM_INFINITY || want < lim.rlim_cur) lim.rlim_cur = want;
  setrlimit(RLIMIT_AS, &lim);
  return 0;
}

}  // namespace fuzz
