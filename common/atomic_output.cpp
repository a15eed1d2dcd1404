#include "common/atomic_output.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "common/error.h"

namespace cae {
namespace {

// Temp paths live in fixed buffers so the signal handler can unlink them without
// allocating (only async-signal-safe calls are allowed there). The final paths' identities
// sit beside them so a second AtomicOutput on the same file is refused.
constexpr int kSlots = 16;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<bool> g_used[kSlots];
std::string g_final_resolved[kSlots];  // touched only outside signal handlers
std::atomic<unsigned> g_serial{0};

// The tool's own line for a fatal signal (set_signal_message), double-buffered so the
// handler never sees one half-copied.
constexpr size_t kMessageMax = 1024;
char g_message[2][kMessageMax];
std::atomic<int> g_message_slot{-1};

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
  if (slot < 0) return;
  g_final_resolved[slot].clear();
  g_used[slot].store(false);
}

extern "C" void cleanup_and_die(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) unlink(g_paths[i]);
  const int m = g_message_slot.load();
  if (m >= 0) {
    ssize_t ignored = write(STDERR_FILENO, g_message[m], strlen(g_message[m]));
    (void)ignored;
  }
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

long name_max_of(const std::string& dir) {
  errno = 0;
  long n = pathconf(dir.c_str(), _PC_NAME_MAX);
  return n > 0 ? n : NAME_MAX;
}

// What a path will be once written: its folder resolved (symlinks, "." and ".."), plus
// the name. An existing file resolves through its own symlink too. Falls back to the
// path as given when the folder does not exist (that is an error caught elsewhere).
std::string resolved_path(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf)) return buf;
  if (realpath(dir_of(path).c_str(), buf)) return std::string(buf) + "/" + base_of(path);
  return path;
}

struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string resolved;
};

Identity identity_of(const std::string& path) {
  Identity id;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  id.resolved = resolved_path(path);
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.resolved == b.resolved;
}

}  // namespace

std::string temp_path_for(const std::string& final_path, unsigned serial) {
  const std::string dir = dir_of(final_path);
  const std::string suffix = ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(serial);
  std::string base = base_of(final_path);
  const size_t room = size_t(name_max_of(dir)) - 1 - suffix.size();  // 1 for the leading '.'
  if (base.size() > room) base.resize(room);
  return dir + "/." + base + suffix;
}

void check_output_path(const std::string& final_path) {
  if (final_path.empty()) throw UsageError("no output path given (-o FILE)");
  struct stat st;
  if (stat(final_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail_file(final_path, "is a folder, expected a file path");
  std::string dir = dir_of(final_path);
  const std::string base = base_of(final_path);
  if (base.empty() || base == "." || base == "..") fail_file(final_path, "names a folder, expected a file path");
  if (stat(dir.c_str(), &st) != 0) fail_file(final_path, "output folder " + dir + " does not exist");
  if (!S_ISDIR(st.st_mode)) fail_file(final_path, dir + " is not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0) fail_file(final_path, "output folder " + dir + " is not writable");
  // The names the rename needs, checked now: the file system refuses a too-long name only
  // when the file is created, i.e. after the whole computation.
  const long name_max = name_max_of(dir);
  if (base.size() > size_t(name_max))
    fail_file(final_path, "the file name is " + std::to_string(base.size()) + " bytes long; the file system allows " +
                              std::to_string(name_max));
  const std::string temp = temp_path_for(final_path, 0);
  if (temp.size() + 24 >= PATH_MAX || final_path.size() >= PATH_MAX)
    fail_file(final_path.substr(0, 80) + "...", "the path is longer than the system's limit of " + std::to_string(PATH_MAX) + " bytes");
}

void check_distinct(const std::vector<FileArg>& inputs, const std::vector<FileArg>& outputs) {
  std::vector<Identity> out_ids;
  for (const FileArg& o : outputs) out_ids.push_back(identity_of(o.path));
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const FileArg& in : inputs) {
      if (in.path.empty()) continue;
      if (same_file(out_ids[i], identity_of(in.path)))
        throw UsageError(outputs[i].option + " " + outputs[i].path + " is the input file of " + in.option + " (" +
                         in.path + "): writing it would replace the data being read; choose another output name");
    }
    for (size_t j = 0; j < i; ++j)
      if (same_file(out_ids[i], out_ids[j]))
        throw UsageError(outputs[j].option + " " + outputs[j].path + " and " + outputs[i].option + " " +
                         outputs[i].path + " name the same file; give each output its own name");
  }
}

AtomicOutput::AtomicOutput(const std::string& final_path) : final_(final_path) {
  check_output_path(final_);
  const std::string resolved = identity_of(final_).resolved;
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load() && g_final_resolved[i] == resolved)
      throw UsageError(final_ + " is already being written as another output of this run; give each output its own name");
  temp_ = temp_path_for(final_, g_serial.fetch_add(1));
  slot_ = register_temp(temp_);
  if (slot_ >= 0) g_final_resolved[slot_] = resolved;
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

void set_signal_message(const std::string& message) {
  if (message.empty()) {
    g_message_slot.store(-1);
    return;
  }
  // Write the buffer the handler is not reading, then publish it.
  const int next = g_message_slot.load() == 0 ? 1 : 0;
  const size_t n = std::min(message.size(), kMessageMax - 2);
  memcpy(g_message[next], message.data(), n);
  g_message[next][n] = '\n';
  g_message[next][n + 1] = '\0';
  g_message_slot.store(next);
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
