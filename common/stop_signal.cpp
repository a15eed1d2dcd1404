#include "common/stop_signal.h"

#include <pthread.h>

#include <exception>

namespace cae {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void note_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  return set;
}

void take_stop_signals_as_usual() {
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = note_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a signal during a file write or a wait must not fail it
  sigaction(SIGUSR1, &sa, &old_usr1_);
  sigaction(SIGTERM, &sa, &old_term_);
  take_stop_signals_as_usual();  // now with the handler: a held signal becomes a request
}

StopSignals::~StopSignals() {
  // A stop was asked for, or an error unwinds: the process is on its way to exit 75 (or
  // 1), and a second signal of the burst must not turn that into 138/143.
  if (g_stop_signal != 0 || std::uncaught_exceptions() > 0) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGUSR1, &ignore, nullptr);
    sigaction(SIGTERM, &ignore, nullptr);
    return;
  }
  sigaction(SIGUSR1, &old_usr1_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

bool StopSignals::requested() const { return g_stop_signal != 0; }
int StopSignals::signal() const { return g_stop_signal; }

}  // namespace cae
