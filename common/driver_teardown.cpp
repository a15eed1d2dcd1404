#include "common/driver_teardown.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace cae {
namespace {

struct DirEntry {  // struct linux_dirent64, as getdents64 lays it out
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

// Calls f(fd, held) for each open file descriptor but the listing's own, held saying whether
// it is a file whose path starts with `prefix`. Plain system calls into stack buffers, no
// allocation: the child below runs it in memory it shares with a process whose other
// threads may hold the allocator's locks.
template <typename F>
void for_each_fd(const char* prefix, F f) {
  const size_t prefix_len = std::strlen(prefix);
  const int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const DirEntry* e = reinterpret_cast<const DirEntry*>(buf + off);
      off += e->reclen;
      int fd = 0;
      const char* c = e->name;
      if (*c < '0' || *c > '9') continue;  // "." and ".."
      for (; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
      if (fd == dir) continue;
      char target[256];
      const ssize_t len = readlinkat(dir, e->name, target, sizeof target);
      f(fd, len >= ssize_t(prefix_len) && std::memcmp(target, prefix, prefix_len) == 0);
    }
  }
  close(dir);
}

pid_t g_parent = 0;
const char* g_prefix = nullptr;
alignas(64) char g_child_stack[64 * 1024];

// The child: keeps the held files (its copies of the parent's descriptors) and the shared
// memory until the parent has gone, then dies with them. Everything else is closed first,
// so that a pipe the parent wrote to (a caller's `$(tool --json)`) ends with the parent.
int hold_until_parent_exits(void*) {
  for_each_fd(g_prefix, [](int fd, bool held) {
    if (!held) close(fd);
  });
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent went before the line above. The system call, not _exit: a call the compiler
  // knows never returns makes AddressSanitizer check the stack, which here is not the one it
  // knows (a false report in the sanitized tests).
  if (getppid() != g_parent) syscall(SYS_exit_group, 0);
  for (;;) pause();
}

}  // namespace

bool files_open(const char* prefix) {
  bool any = false;
  for_each_fd(prefix, [&any](int, bool held) { any = any || held; });
  return any;
}

void exit_leaving_release_of(const char* prefix, int status) {
  if (!files_open(prefix)) return;
  std::fflush(nullptr);
  g_parent = getpid();
  g_prefix = prefix;
  // CLONE_VM: the child shares the memory instead of copying its page tables (fork would,
  // for every gigabyte the tool still holds), and so the mappings' teardown is its too.
  // SIGCHLD: an ordinary child, which whoever adopts it reaps with a plain wait.
  if (clone(hold_until_parent_exits, g_child_stack + sizeof g_child_stack, CLONE_VM | SIGCHLD, nullptr) == -1)
    return;  // the ordinary exit, teardown included
  _exit(status);
}

void exit_leaving_driver_teardown(int status) { exit_leaving_release_of(kDriverFiles, status); }

}  // namespace cae
