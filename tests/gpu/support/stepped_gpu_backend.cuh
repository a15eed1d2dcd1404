// One training step of the GPU backend (kernels/ae/cuda/backend_gpu.cuh) as separate
// stages, for the step profiler (step_profiler.h, behind make bench-gpu's per-layer table):
// the backend itself, plus a way to issue each stage of its captured step alone. Built only
// into build/tests/gpu_tests.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "kernels/ae/cuda/backend_gpu.cuh"

namespace gpu_test {

struct StepStage {
  std::string name;  // the plan's stage names ("input im2col", LayerPlan::forward_name, ...)
  double flops = 0;  // useful floating-point operations of the stage (padding not counted)
  std::function<void(cudaStream_t)> run;
};

// A single-GPU backend (as ae::make_gpu_backend makes) with the stepped view.
class SteppedGpuBackend final : public ae::cuda::GpuBackend {
 public:
  SteppedGpuBackend(const ae::Architecture& arch, const ae::OptimizerConfig& opt, ae::Precision precision)
      : GpuBackend(arch, opt, precision) {}

  // The stages of one training step of `batch` images, in the order the step issues them;
  // the step reads training images 0..batch−1 (set_train_images first, at least `batch`).
  std::vector<StepStage> stages_of_step(int batch);
  void rewind();                                   // the next step starts at image 0 again
  void replay_step(int batch);                     // one whole step as its CUDA graph replays it
  cudaStream_t stream() const { return stream_; }  // where stages and replays run
  // The tiles the step's convolutions were timed to, "layer 1 fwd 128x128/3, …".
  std::string conv_tiles() const;
};

}  // namespace gpu_test
