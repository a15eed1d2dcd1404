// The device seam: every compute tool takes --device auto|cpu|gpu and resolves it here.
#pragma once
#include <string>

namespace cae {

enum class Device { cpu, gpu };
const char* device_name(Device d);

// True when this build has CUDA and a usable GPU is present (asks the driver once, and waits
// for an answer already being asked by a DeviceChoice).
bool gpu_available();
// GPUs this process can see (0 without CUDA).
int gpu_count();

// A tool's --device, decided beside its first reads. "cpu" is decided at once and never
// touches CUDA; "gpu" and "auto" ask the CUDA driver on a thread of its own from the moment
// the choice is made: the driver's start (cuInit), which
// was most of a GPU tool's start-up while the main thread asked it (docs/DECISIONS.md, "The
// driver is asked beside the first reads"). A tool makes its choice as soon as its options
// are parsed, opens and reads its inputs, and calls get() where the device first matters.
class DeviceChoice {
 public:
  explicit DeviceChoice(const std::string& requested);  // UsageError unless auto, cpu or gpu
  DeviceChoice(Device device);  // NOLINT: --device with that device's name (cpu asks nothing)
  // The device. Waits for the driver's answer; "gpu" without a usable GPU throws a clear error
  // ("this build has no CUDA support" or "no CUDA GPU found: ...").
  Device get() const;
  // False only where get() is certainly the CPU (--device cpu): nothing for a GPU is started.
  bool may_use_gpu() const { return requested_ != "cpu"; }

 private:
  std::string requested_;  // "auto", "cpu" or "gpu"
};

// Starts creating GPU `gpu`'s CUDA context on a background thread and returns at once: the
// thread waits for the driver's answer (gpu_available) and makes the context only where there
// is a GPU, so a tool may call it whenever its device may be a GPU. A GPU tool's first CUDA
// call otherwise creates it after the inputs are read (docs/DECISIONS.md, "The driver is asked
// beside the first reads; the context is made while reading"); started before they are
// read, it is made meanwhile, and the first call finds it ready (or waits for it inside the
// driver). `gpu` is the GPU the tool will use: 0, or what select_group_gpu chose for a
// rank of a group. A second call does nothing, and so does a build without CUDA. Errors are
// left to the tool's own first CUDA call, which reports them.
void start_gpu_context(int gpu);
// Waits for the context start_gpu_context() began and for the driver's answer, if either was
// asked for: run_tool calls it before a tool returns, so that exit never tears the CUDA
// runtime down under a background thread.
void settle_gpu_context();

}  // namespace cae
