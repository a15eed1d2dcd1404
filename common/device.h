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

}  // namespace cae
