#include "common/atomic_output.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "common/error.h"

namespace cae {
namespace {

// Temp paths live in fixed buffers so the signal handler can unlink them without
// allocating (only async-signal-safe calls are allowed there).
constexpr int kSlots = 16;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<bool> g_used[kSlots];

int register_temp(const std::string& path) {
  if (path.size() >= kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_used[i].compare_exchange_strong(expected, true)) {
      memcpy(g_paths[i], path.c_str(), path.size() + 1);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_used[slot].store(false);
}

extern "C" void cleanup_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) unlink(g_paths[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

std::string dir_of(const std::string& p) {
  auto pos = p.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return p.substr(0, pos);
}
std::string base_of(const std::string& p) {
  auto pos = p.find_last_of('/');
  return pos == std::string::npos ? p : p.substr(pos + 1);
}

}  // namespace

void check_output_path(const std::string& final_path) {
  if (final_path.empty()) throw UsageError("no output path given (-o FILE)");
  struct stat st;
  if (stat(final_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail_file(final_path, "is a folder, expected a file path");
  std::string dir = dir_of(final_path);
  if (stat(dir.c_str(), &st) != 0) fail_file(final_path, "output folder " + dir + " does not exist");
  if (!S_ISDIR(st.st_mode)) fail_file(final_path, dir + " is not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0) fail_file(final_path, "output folder " + dir + " is not writable");
}

AtomicOutput::AtomicOutput(const std::string& final_path) : final_(final_path) {
  check_output_path(final_);
  temp_ = dir_of(final_) + "/." + base_of(final_) + ".tmp-" + std::to_string(getpid());
  slot_ = register_temp(temp_);
  unlink(temp_.c_str());  // a leftover from a killed run with the same pid
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) unlink(temp_.c_str());
  unregister_temp(slot_);
}

void AtomicOutput::commit() {
  int fd = open(temp_.c_str(), O_RDONLY);
  if (fd < 0) fail_file(final_, "temporary output vanished before it was complete");
  bool synced = fsync(fd) == 0;
  close(fd);
  if (!synced) fail_file(final_, std::string("cannot sync output: ") + strerror(errno));
  if (rename(temp_.c_str(), final_.c_str()) != 0) fail_file(final_, std::string("cannot rename output into place: ") + strerror(errno));
  committed_ = true;
}

void install_cleanup_signal_handlers() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = cleanup_and_die;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  // Past a file size limit (ulimit -f) the kernel sends SIGXFSZ, whose default action kills
  // the tool silently and leaves its temporary file behind. Ignored, the write fails with
  // EFBIG instead, and the tool reports it and removes the temporary file like any error.
  signal(SIGXFSZ, SIG_IGN);
}

}  // namespace cae
