// A tool that used the GPU ends without making its caller wait for the driver's teardown.
//
// When a process that opened the NVIDIA driver exits, the kernel closes its /dev/nvidia*
// files and the driver destroys its context there: 0.10-0.17 s on the H200 host with nothing
// allocated or 8 GB (2026-11-28), 0.11-0.29 s of each GPU tool in the pipeline — after the
// tool's outputs are committed, yet Make waits for it before starting the next stage.
// exit_leaving_driver_teardown() starts a child that shares the process's memory and holds
// copies of its driver files (every other file closed), then ends the process with `status`
// at once: the caller sees the status and the end of the output immediately, and the child,
// killed as its parent goes (PR_SET_PDEATHSIG), is the last holder and pays the teardown
// while the next stage starts (docs/DECISIONS.md, "A GPU tool leaves the driver's teardown
// to a child").
#pragma once

namespace cae {

// Returns without doing anything when the process has no driver file open (a CPU run, a
// build without CUDA) or the child cannot be started; otherwise flushes stdio and ends the
// process with _exit(status): no destructors or atexit handlers run after it.
void exit_leaving_driver_teardown(int status);

// The same for any files: those whose path starts with `prefix` (a tested stand-in for the
// driver's, which machines without a GPU lack).
inline constexpr const char* kDriverFiles = "/dev/nvidia";
void exit_leaving_release_of(const char* prefix, int status);

// Whether this process has a file whose path starts with `prefix` open.
bool files_open(const char* prefix);

}  // namespace cae
