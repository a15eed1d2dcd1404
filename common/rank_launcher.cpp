#include "common/rank_launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "common/error.h"

namespace cae {

namespace {

constexpr int kMaxRanks = 64;
pid_t g_children[kMaxRanks];
std::atomic<int> g_child_count{0};

extern "C" void forward_signal(int sig) {
  const int n = g_child_count.load();
  for (int i = 0; i < n; ++i)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

}  // namespace

std::vector<std::string> args_without_option(int argc, char** argv, const std::string& name) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == name) {
      ++i;  // and its value
      continue;
    }
    if (a.rfind(name + "=", 0) == 0) continue;
    out.push_back(a);
  }
  return out;
}

int launch_ranks(int ranks, const std::vector<std::string>& args,
                 const std::function<std::vector<std::string>(int)>& rank_args, int* failed_rank) {
  if (ranks < 1 || ranks > kMaxRanks) throw std::invalid_argument("launch_ranks: 1 to 64 ranks");
  if (failed_rank) *failed_rank = -1;
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) throw std::runtime_error("cannot find this executable (/proc/self/exe) to start the ranks");
  self[len] = '\0';

  struct sigaction sa {}, old_int{}, old_term{}, old_usr1{};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGUSR1, &sa, &old_usr1);  // a scheduler's "save and stop" (ae-train: preemption)

  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> a{self};
    a.insert(a.end(), args.begin(), args.end());
    const std::vector<std::string> extra = rank_args(r);
    a.insert(a.end(), extra.begin(), extra.end());
    std::vector<char*> cargv;
    for (auto& s : a) cargv.push_back(const_cast<char*>(s.c_str()));
    cargv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      forward_signal(SIGTERM);
      throw std::runtime_error(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGUSR1, SIG_DFL);
      execv(self, cargv.data());
      _exit(127);
    }
    g_children[r] = pid;
    g_child_count.store(r + 1);
  }

  int status_out = 0, running = ranks;
  bool stopping = false;
  std::chrono::steady_clock::time_point kill_at{};
  while (running > 0) {
    int st = 0;
    const pid_t pid = waitpid(-1, &st, stopping ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pid == 0) {  // stopping, none exited yet: SIGKILL whoever ignores SIGTERM
      if (std::chrono::steady_clock::now() > kill_at) forward_signal(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    int rank = -1;
    for (int i = 0; i < ranks; ++i)
      if (g_children[i] == pid) rank = i;
    if (rank < 0) continue;
    g_children[rank] = -1;
    --running;
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    // An interrupted rank (exit 75) stopped with the others after the same step (they agree
    // on it) and rank 0 may still be writing the checkpoint: the group is left to finish.
    if (code != 0 && (status_out == 0 || status_out == kExitInterrupted) && code != status_out) {
      status_out = code;
      if (failed_rank) *failed_rank = rank;
      if (code != kExitInterrupted) {
        forward_signal(SIGTERM);  // a failed rank stops the group
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
    }
  }
  g_child_count.store(0);
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGUSR1, &old_usr1, nullptr);
  return status_out;
}

}  // namespace cae
