// Preemption: while a StopSignals lives, SIGUSR1 and SIGTERM no longer end the process;
// they only set a flag that a long loop reads between its units of work (ae::Trainer::run's
// steps, svm::train's cross-validation cells and probability folds), so the run can finish
// the unit in progress, save a resumable checkpoint and exit with kExitInterrupted. A
// cluster scheduler sends one of them before it preempts or time-limits a job (Slurm: --signal=B:USR1@<seconds>, or SIGTERM at the end).
// SIGINT keeps its usual meaning (Ctrl-C: stop now, the last epoch's checkpoint stays).
#pragma once
#include <csignal>

#include "common/error.h"

namespace cae {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores the previous ones
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;
  // The signal that asked to stop (SIGUSR1 or SIGTERM), 0 when none did.
  int signal() const;

 private:
  struct sigaction old_usr1_ {}, old_term_{};
};

}  // namespace cae
