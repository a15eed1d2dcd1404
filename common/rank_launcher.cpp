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
#include "common/stop_signal.h"

namespace cae {

namespace {

constexpr int kMaxRanks = 64;
pid_t g_children[kMaxRanks];
std::atomic<int> g_child_count{0};

// The stop signal the launcher was sent (SIGINT, SIGTERM or SIGUSR1), 0 while none was: a
// rank started after it arrived is sent it too.
volatile std::sig_atomic_t g_received = 0;

void signal_children(int sig) {
  const int n = g_child_count.load();
  for (int i = 0; i < n; ++i)
    if (g_children[i] > 0) kill(g_children[i], sig);
}

extern "C" void forward_signal(int sig) {
  g_received = sig;
  signal_children(sig);
}

void set_handler(int sig, void (*handler)(int), struct sigaction* old) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, old);
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

  struct sigaction old_int {}, old_term{}, old_usr1{};
  g_received = 0;
  set_handler(SIGINT, forward_signal, &old_int);
  set_handler(SIGTERM, forward_signal, &old_term);
  set_handler(SIGUSR1, forward_signal, &old_usr1);  // a scheduler's "save and stop" (ae-train: preemption)
  // While a rank is forked, the signals wait: the child must not run the launcher's handler,
  // and one that arrives then reaches the rank once its pid is known.
  sigset_t all = stop_signal_set(), before;
  sigaddset(&all, SIGINT);

  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> a{self};
    a.insert(a.end(), args.begin(), args.end());
    const std::vector<std::string> extra = rank_args(r);
    a.insert(a.end(), extra.begin(), extra.end());
    std::vector<char*> cargv;
    for (auto& s : a) cargv.push_back(const_cast<char*>(s.c_str()));
    cargv.push_back(nullptr);
    sigprocmask(SIG_BLOCK, &all, &before);
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      sigprocmask(SIG_SETMASK, &before, nullptr);
      signal_children(SIGTERM);
      throw std::runtime_error(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(err));
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGUSR1, SIG_DFL);
      // The rank starts with SIGUSR1/SIGTERM held, until its StopSignals (or
      // take_stop_signals_as_usual) takes them: one sent before would end it unsaved.
      sigset_t held = stop_signal_set();
      sigprocmask(SIG_SETMASK, &held, nullptr);
      execv(self, cargv.data());
      _exit(127);
    }
    g_children[r] = pid;
    g_child_count.store(r + 1);
    if (g_received != 0) kill(pid, g_received);
    sigprocmask(SIG_SETMASK, &before, nullptr);
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
      if (std::chrono::steady_clock::now() > kill_at) signal_children(SIGKILL);
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
        signal_children(SIGTERM);  // a failed rank stops the group
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
    }
  }
  g_child_count.store(0);
  sigaction(SIGINT, &old_int, nullptr);
  // Told to stop, the launcher exits 75 (or the ranks' failure) next: the rest of a burst
  // must not end it with 138/143 instead.
  if (g_received != 0) {
    set_handler(SIGTERM, SIG_IGN, nullptr);
    set_handler(SIGUSR1, SIG_IGN, nullptr);
  } else {
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGUSR1, &old_usr1, nullptr);
  }
  return status_out;
}

}  // namespace cae
