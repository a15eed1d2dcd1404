// Preemption: while a StopSignals lives, SIGUSR1 and SIGTERM no longer end the process;
// they only set a flag that a long loop reads between its units of work (ae::Trainer::run's
// steps, svm::train's cross-validation cells and probability folds), so the run can finish
// the unit in progress, save a resumable checkpoint and exit with kExitInterrupted. A
// cluster scheduler sends one of them before it preempts or time-limits a job (Slurm: --signal=B:USR1@<seconds>, or SIGTERM at the end).
// SIGINT keeps its usual meaning (Ctrl-C: stop now, the last epoch's checkpoint stays).
//
// The gaps around the handler: a scheduler sends bursts, and a signal that lands where no
// handler is would end the process with 138/143 instead of 75. So the ranks a launcher
// starts (launch_ranks) begin with SIGUSR1/SIGTERM blocked, held pending until their
// StopSignals is in place (or, for a rank that has none, take_stop_signals_as_usual); and
// once a stop was asked for (or the process is unwinding from an error), the handler's
// end leaves them ignored for the rest of the process's short life.
#pragma once
#include <csignal>

#include "common/error.h"

namespace cae {

class StopSignals {
 public:
  StopSignals();   // installs the handlers, then takes signals held since the start
  ~StopSignals();  // restores the previous ones, or ignores both signals (see above)
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;
  // The signal that asked to stop (SIGUSR1 or SIGTERM), 0 when none did.
  int signal() const;

 private:
  struct sigaction old_usr1_ {}, old_term_{};
};

// The two stop signals, SIGUSR1 and SIGTERM.
sigset_t stop_signal_set();

// For a process that will not catch the stop signals: takes them as usual from now on
// (one held pending since the start is delivered, with its default action).
void take_stop_signals_as_usual();

}  // namespace cae
