// The gaps around the preemption handler (common/stop_signal.h): a signal held since the
// start becomes a request once the handler is in place, and after a request the handler's
// end leaves both signals ignored instead of bringing their default action back.
#include <gtest/gtest.h>
#include <pthread.h>

#include <csignal>

#include "common/stop_signal.h"

namespace {

// Saves the dispositions and this thread's mask of SIGUSR1/SIGTERM, and puts them back.
struct KeepSignals {
  struct sigaction usr1 {}, term{};
  sigset_t mask;
  KeepSignals() {
    sigaction(SIGUSR1, nullptr, &usr1);
    sigaction(SIGTERM, nullptr, &term);
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  }
  ~KeepSignals() {
    sigaction(SIGUSR1, &usr1, nullptr);
    sigaction(SIGTERM, &term, nullptr);
    pthread_sigmask(SIG_SETMASK, &mask, nullptr);
  }
};

void (*handler_of(int sig))(int) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

TEST(StopSignals, ASignalHeldSinceTheStartIsARequestOnceTheHandlerIsIn) {
  KeepSignals keep;
  const sigset_t held = cae::stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &held, nullptr);  // as launch_ranks starts a rank
  raise(SIGTERM);                              // pending: its default action would end the test
  cae::StopSignals stop;
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.signal(), SIGTERM);
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  EXPECT_FALSE(sigismember(&now, SIGTERM)) << "the handler takes the signals from here on";
}

TEST(StopSignals, AfterARequestBothSignalsStayIgnoredWithoutOneTheyAreRestored) {
  KeepSignals keep;
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  {
    cae::StopSignals stop;
    EXPECT_FALSE(stop.requested());
  }
  EXPECT_EQ(handler_of(SIGTERM), SIG_DFL);
  EXPECT_EQ(handler_of(SIGUSR1), SIG_DFL);
  {
    cae::StopSignals stop;
    raise(SIGUSR1);
    EXPECT_EQ(stop.signal(), SIGUSR1);
  }
  // The process is on its way to exit 75: the rest of the burst must not end it with 138/143.
  EXPECT_EQ(handler_of(SIGUSR1), SIG_IGN);
  EXPECT_EQ(handler_of(SIGTERM), SIG_IGN);
  raise(SIGUSR1);
  raise(SIGTERM);  // still here
}

TEST(StopSignals, TakingThemAsUsualDeliversAHeldSignal) {
  KeepSignals keep;
  signal(SIGUSR1, SIG_IGN);  // its default action would end the test; ignored, it only goes
  const sigset_t held = cae::stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &held, nullptr);
  raise(SIGUSR1);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_TRUE(sigismember(&pending, SIGUSR1));
  cae::take_stop_signals_as_usual();
  sigpending(&pending);
  EXPECT_FALSE(sigismember(&pending, SIGUSR1));
}

}  // namespace
