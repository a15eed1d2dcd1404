// Timing of the GPU backend itself (not a test: DISABLED_ so that `make test-gpu` skips it).
// bench/bench-gpu.sh runs it with --gtest_also_run_disabled_tests when asked for the
// backend-only numbers and the per-kernel table; the headline numbers come from ae-train
// and ae-encode. Prints lines "BENCH key=value ...".
//   AE_BENCH_IMAGES (50000)  AE_BENCH_BATCHES (64,256)  AE_BENCH_ENCODE (60000)
//   AE_BENCH_PROFILE_ONLY=1: only the per-kernel table (batch 256)  AE_BENCH_PRECISION=fp32|bf16: only one
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ae/model.h"
#include "kernels/ae/cuda/layers_cuda.cuh"
#include "tests/gpu/gpu_test_util.h"

using namespace gpu_test;

namespace {

int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}
std::vector<int> env_list(const char* name, const char* def) {
  const char* v = std::getenv(name);
  std::stringstream ss(v && *v ? v : def);
  std::vector<int> out;
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

TEST(BenchGpu, DISABLED_TrainEpochAndEncode) {
  REQUIRE_GPU();
  const int n = env_int("AE_BENCH_IMAGES", 50000), n_enc = env_int("AE_BENCH_ENCODE", 60000);
  // Random pixels: speed does not depend on the image content (no data-dependent paths).
  std::vector<uint8_t> images(size_t(std::max(n, n_enc)) * ae::kImageDim);
  std::mt19937_64 rng(1);
  for (auto& b : images) b = uint8_t(rng() >> 56);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> latent;

  const bool profile_only = env_int("AE_BENCH_PROFILE_ONLY", 0) != 0;
  const char* only = std::getenv("AE_BENCH_PRECISION");  // fp32 or bf16: only that one
  for (ae::Precision p : {ae::Precision::fp32, ae::Precision::bf16}) {
    if (only && *only && std::string(only) != ae::precision_name(p)) continue;
    ae::OptimizerConfig adam;
    auto gpu = ae::make_gpu_backend(adam, p);
    gpu->set_params(ae::init_params(0));
    gpu->set_train_images(images.data(), n);
    if (profile_only) {
      std::printf("%s", ae::cuda::profile_training_step(*gpu, 256, 20).c_str());
      continue;
    }
    for (int batch : env_list("AE_BENCH_BATCHES", "64,256")) {
      // warm-up: graph capture, first touches
      std::vector<int64_t> warm(order.begin(), order.begin() + std::min<size_t>(order.size(), size_t(batch) * 20));
      gpu->train_epoch(warm, batch, 1e-3f, {});
      const double t0 = now();
      const double loss = gpu->train_epoch(order, batch, 1e-3f, {});
      const double dt = now() - t0;
      std::printf("BENCH train precision=%s batch=%d images=%d s_per_epoch=%.4f loss=%.5f\n", ae::precision_name(p),
                  batch, n, dt, loss);
    }
    latent.resize(size_t(n_enc) * ae::kLatentDim);
    gpu->encode(images.data(), std::min(n_enc, 2048), 1024, latent.data());  // warm-up
    const double t0 = now();
    gpu->encode(images.data(), n_enc, 1024, latent.data());
    const double dt = now() - t0;
    std::printf("BENCH encode precision=%s images=%d seconds=%.4f\n", ae::precision_name(p), n_enc, dt);
    std::printf("%s", ae::cuda::profile_training_step(*gpu, 256, 20).c_str());
    std::fflush(stdout);
  }
}

}  // namespace
