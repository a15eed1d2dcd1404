// The device seam: every compute tool takes --device auto|cpu|gpu and resolves it here.
#pragma once
#include <string>

namespace cae {

enum class Device { cpu, gpu };
const char* device_name(Device d);

// True when this build has CUDA and a usable GPU is present.
bool gpu_available();
// GPUs this process can see (0 without CUDA).
int gpu_count();
// Name of GPU 0 (e.g. "NVIDIA H100 80GB HBM3"), or "" when none.
std::string gpu_name();

// "auto" → gpu when available, else cpu; "gpu" without one throws a clear error
// ("this build has no CUDA support" or "no CUDA GPU found: ...").
Device resolve_device(const std::string& requested);

// Starts creating the CUDA context of the calling thread's current GPU on a background thread
// and returns at once. A GPU tool's first CUDA call otherwise creates it (0.1–0.3 s) after the
// inputs are read; started as soon as the GPU is chosen, it is made while they are read, and
// the first call finds it ready (or waits for it inside the driver). Call it once the tool's
// GPU is set (after select_group_gpu); a second call does nothing, and so does a build
// without CUDA. Errors are left to the tool's own first CUDA call, which reports them.
void start_gpu_context();
// Waits for the context start_gpu_context() began, if any: run_tool calls it before a tool
// returns, so that exit never tears the CUDA runtime down under the background thread.
void settle_gpu_context();

}  // namespace cae
