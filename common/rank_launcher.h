// Starts the ranks of a one-node data-parallel run as child processes of this one (what
// `ae-train --gpus N` does; on a cluster, srun starts them instead). Each child is this
// executable with the same arguments, less the launcher's own option, plus its rank's.
// When a rank fails, the others are stopped (SIGTERM, then SIGKILL) and the failing rank's
// exit status is returned; SIGINT/SIGTERM/SIGUSR1 to the launcher are passed on to every rank
// (also to one started after the signal came). Each rank starts with SIGUSR1/SIGTERM held
// until it takes them (common/stop_signal.h), so a signal passed on before a rank's
// handler is in place stops it as one passed on later does.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace cae {

// `args` are this process's arguments without argv[0] and without the launcher's option;
// `rank_args(r)` are appended for rank r. Returns 0 when every rank exited 0, else the
// first failure's exit status (128 + signal for a rank killed by a signal). `failed_rank`
// (when given) receives the first failing rank, or -1.
int launch_ranks(int ranks, const std::vector<std::string>& args,
                 const std::function<std::vector<std::string>(int)>& rank_args, int* failed_rank = nullptr);

// `argv` without the option `name` and its value (both "--name V" and "--name=V").
std::vector<std::string> args_without_option(int argc, char** argv, const std::string& name);

}  // namespace cae
