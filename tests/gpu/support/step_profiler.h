// The per-stage profile of one GPU training step (bench/bench-gpu.sh's per-layer table, by
// way of tests/gpu/bench_gpu.cu): each stage of the backend's step (GpuBackend::stages_of_step)
// timed alone with CUDA events, then the whole step as its graph replays it.
#pragma once
#include <string>

#include "kernels/ae/cuda/backend_gpu.cuh"

namespace gpu_test {

// A table (stage, ms, GFLOP, TFLOP/s; medians of `repeats` runs) ending with the sum of the
// stages and the graph replay of the whole step. The backend must have at least `batch`
// training images. only_stages non-empty: instead, runs the stages whose names start with
// it once, between cudaProfilerStart/Stop (Nsight Compute with --profile-from-start off),
// and returns a line saying so.
std::string profile_training_step(ae::cuda::GpuBackend& gpu, int batch, int repeats, const std::string& only_stages);

}  // namespace gpu_test
