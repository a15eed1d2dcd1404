// One definition of the memory a process may use (common/memory_limit.h): svm-fit's
// --cache-mb bound and default (cae::usable_memory_bytes) weigh the limits memory_headroom
// weighs, whole — an rlimit as set, not less what the process already maps — while
// require_memory's headroom takes off what the process holds.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/cli.h"
#include "common/memory_limit.h"

namespace {

uint64_t physical_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
}

}  // namespace

TEST(UsableMemory, IsTheLeastLimitThatMemoryHeadroomWeighs) {
  const cae::MemoryHeadroom h = cae::memory_headroom();
  const uint64_t usable = cae::usable_memory_bytes();
  EXPECT_EQ(usable, cae::memory_limit_bytes());
  EXPECT_GT(usable, uint64_t(1) << 20);
  EXPECT_GE(usable, h.bytes);  // what is left never exceeds the limit
  EXPECT_LE(usable, physical_bytes());
  if (const uint64_t cgroup = cae::cgroup_memory_limit()) {
    EXPECT_LE(usable, cgroup);
  }
}

TEST(UsableMemory, AnAddressSpaceLimitCountsWholeAndItsHeadroomLessWhatIsMapped) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer maps terabytes of shadow memory: no address-space limit leaves it room";
#else
  struct rlimit as;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &as), 0);
  if (as.rlim_cur != RLIM_INFINITY) GTEST_SKIP() << "already under an address-space limit";
  const uint64_t usable = cae::usable_memory_bytes();
  if (usable == UINT64_MAX || usable < (uint64_t(4) << 30)) GTEST_SKIP() << "no limit below 4 GiB to test";
  // Below every other limit; in a child, so that this process keeps its address space (the
  // child runs no OpenMP: it only reads /proc and the rlimits).
  const uint64_t limit = usable - (uint64_t(1) << 30);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit lim = {static_cast<rlim_t>(limit), as.rlim_max};
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(10);
    if (cae::usable_memory_bytes() != limit) _exit(11);  // the limit as set, as before
    const cae::MemoryHeadroom h = cae::memory_headroom();
    if (!(h.bytes < limit)) _exit(12);                     // less what is mapped already
    if (h.limit.find("ulimit -v") == std::string::npos) _exit(13);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 setrlimit, 11 usable, 12 headroom, 13 limit's name";
#endif
}
