// common/driver_teardown: a process that holds the named files ends at once with its status,
// its output complete, and a child releases those files once the process has gone. Files
// under a temporary folder stand in for the driver's (/dev/nvidia*), which CI lacks.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/driver_teardown.h"

namespace {

TEST(DriverTeardown, NothingHeldReturns) {
  const std::string prefix = testing::TempDir() + "cae-no-such-folder/";
  EXPECT_FALSE(cae::files_open(prefix.c_str()));
  cae::exit_leaving_release_of(prefix.c_str(), 3);  // returns (had it ended the process, the run fails)
  SUCCEED();
}

TEST(DriverTeardown, EndsWithTheStatusAndTheFilesAreReleasedAfter) {
  // gtest's threadsafe death test runs this body again in a fresh process: the file's name
  // reaches it through the environment.
  std::string file;
  if (const char* given = std::getenv("CAE_TEST_TEARDOWN_FILE")) {
    file = given;
  } else {
    char dir[] = "/tmp/cae-teardown-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    file = std::string(dir) + "/held";
    ASSERT_EQ(setenv("CAE_TEST_TEARDOWN_FILE", file.c_str(), 1), 0);
  }
  const std::string prefix = file.substr(0, file.rfind('/') + 1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // A lock belongs to the open file, which the child's copy of the descriptor keeps.
        const int held = open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (held < 0 || flock(held, LOCK_EX) != 0 || !cae::files_open(prefix.c_str())) std::_Exit(1);
        std::fprintf(stderr, "ending\n");
        cae::exit_leaving_release_of(prefix.c_str(), 7);
        std::_Exit(2);  // it returned: no child was started
      },
      testing::ExitedWithCode(7), "ending");
  // The lock comes free once the child is gone too (it goes with its parent).
  const int fd = open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  bool released = false;
  for (int i = 0; i < 500 && !released; ++i) {
    released = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(released) << "the file is still held 5 s after the process ended";
  close(fd);
  unlink(file.c_str());
  rmdir(prefix.c_str());
  unsetenv("CAE_TEST_TEARDOWN_FILE");
}

}  // namespace
