// Preemption: while a StopSignals lives, SIGUSR1 and SIGTERM no longer end the process;
// they only set a flag that the training loop reads between steps (ae::Trainer::run's
// `stop`), so the run can finish its step, save a resumable checkpoint and exit with
// kExitInterrupted. A cluster scheduler sends one of them before it preempts or
// time-limits a job (Slurm: --signal=B:USR1@<seconds>, or SIGTERM at the end).
// SIGINT keeps its usual meaning (Ctrl-C: stop now, the last epoch's checkpoint stays).
#pragma once
#include <csignal>

#include "common/error.h"

namespace ae {

// cae::kExitInterrupted (75, EX_TEMPFAIL of <sysexits.h>): interrupted, checkpoint written,
// rerun with --resume (docs/RELIABILITY.md, "Preemption").
using cae::kExitInterrupted;

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

}  // namespace ae
