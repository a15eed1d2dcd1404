#include "tests/gpu/support/step_profiler.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/cuda_check.cuh"

namespace gpu_test {

std::string profile_training_step(ae::cuda::GpuBackend& gpu, int batch, int repeats, const std::string& only_stages) {
  if (repeats <= 0) throw std::invalid_argument("profile: repeats must be positive");
  std::vector<ae::cuda::GpuBackend::StepStage> stages = gpu.stages_of_step(batch);
  const cudaStream_t stream = gpu.stream();
  cudaEvent_t t0, t1;
  AE_CUDA_CHECK(cudaEventCreate(&t0));
  AE_CUDA_CHECK(cudaEventCreate(&t1));
  // The median over `repeats` runs of `work`, timed by CUDA events; `before` runs first,
  // untimed, each time.
  auto median_ms = [&](const std::function<void()>& work, const std::function<void()>& before = {}) {
    std::vector<float> ms;
    for (int r = 0; r < repeats; ++r) {
      if (before) before();
      AE_CUDA_CHECK(cudaEventRecord(t0, stream));
      work();
      AE_CUDA_CHECK(cudaEventRecord(t1, stream));
      AE_CUDA_CHECK(cudaEventSynchronize(t1));
      float v = 0;
      AE_CUDA_CHECK(cudaEventElapsedTime(&v, t0, t1));
      ms.push_back(v);
    }
    std::sort(ms.begin(), ms.end());
    return double(ms[ms.size() / 2]);
  };
  gpu.rewind_step();
  for (auto& s : stages) s.run(stream);  // warm-up
  gpu.rewind_step();
  if (!only_stages.empty()) {
    // For Nsight Compute (ncu --profile-from-start off): the matching stages, once, alone.
    AE_CUDA_CHECK(cudaStreamSynchronize(stream));
    AE_CUDA_CHECK(cudaProfilerStart());
    for (auto& s : stages)
      if (s.name.rfind(only_stages, 0) == 0) s.run(stream);
    AE_CUDA_CHECK(cudaStreamSynchronize(stream));
    AE_CUDA_CHECK(cudaProfilerStop());
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return "profiled stages matching '" + only_stages + "' for Nsight Compute\n";
  }
  const ae::AeBackend& backend = gpu;
  std::ostringstream out;
  char line[200];
  out << "per-kernel times, " << backend.describe() << ", " << backend.architecture().describe() << ", batch " << batch
      << ", median of " << repeats << " runs\n";
  std::snprintf(line, sizeof line, "  %-34s %9s %9s %9s\n", "stage", "ms", "GFLOP", "TFLOP/s");
  out << line;
  double total_ms = 0, total_flops = 0;
  for (auto& s : stages) {
    if (s.name == "advance") continue;
    const double med = median_ms([&] { s.run(stream); });
    total_ms += med;
    total_flops += s.flops;
    std::snprintf(line, sizeof line, "  %-34s %9.4f %9.2f %9.1f\n", s.name.c_str(), med, s.flops / 1e9,
                  s.flops > 0 ? s.flops / (med * 1e-3) / 1e12 : 0.0);
    out << line;
  }
  std::snprintf(line, sizeof line, "  %-34s %9.4f %9.2f %9.1f\n", "sum of stages", total_ms, total_flops / 1e9,
                total_flops / (total_ms * 1e-3) / 1e12);
  out << line;
  // The whole step as the graph replays it.
  const auto rewind = [&] { gpu.rewind_step(); };
  rewind();
  gpu.replay_step(batch);  // captures the graph, outside the timed runs
  rewind();
  const double med = median_ms([&] { gpu.replay_step(batch); }, rewind);
  std::snprintf(line, sizeof line, "  %-34s %9.4f %9.2f %9.1f  (%.3f s per 50,000 images)\n",
                "graph replay (whole step)", med, total_flops / 1e9, total_flops / (med * 1e-3) / 1e12,
                med * 1e-3 * 50000.0 / batch);
  out << line;
  out << "  tiles: " << gpu.conv_tiles() << "\n";
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  rewind();
  return out.str();
}

}  // namespace gpu_test
