// Timing of the GPU backend itself (not a test: DISABLED_ so that `make test-gpu` skips it).
// bench/bench-gpu.sh runs it with --gtest_also_run_disabled_tests for the backend-only
// numbers and the per-layer table of every architecture; the headline numbers of the seed
// model come from ae-train and ae-encode. Prints lines "BENCH key=value ..." and, per
// architecture and precision, the per-stage table of tests/gpu/support/step_profiler.h
// (per-layer TFLOP/s).
// Bench-only settings (environment; production code reads none):
//   AE_BENCH_ARCHS    architectures, ';'-separated CxHxW:channels
//                     (default "3x32x32:256,128;1x28x28:64,32;3x32x32:96,48,24")
//   AE_BENCH_IMAGES (50000)  AE_BENCH_BATCHES (64,256)  AE_BENCH_ENCODE (60000)
//   AE_BENCH_PROFILE_ONLY=1: only the per-layer tables   AE_BENCH_PROFILE_BATCH (256): their batch
//   AE_BENCH_PRECISION=fp32|bf16: only that one
//   AE_BENCH_PROFILE_STAGE=PREFIX: run the stages whose names start with PREFIX once, for
//                     Nsight Compute (ncu --profile-from-start off), instead of the tables
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ae/backend.h"
#include "kernels/ae/model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/support/step_profiler.h"

using namespace gpu_test;

namespace {

int env_int(const char* name, int def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : def;
}
std::string env_str(const char* name, const char* def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}
// "3x32x32:256,128"
ae::Architecture parse_arch(const std::string& text) {
  const size_t colon = text.find(':');
  int C = 0, H = 0, W = 0;
  if (colon == std::string::npos || std::sscanf(text.substr(0, colon).c_str(), "%dx%dx%d", &C, &H, &W) != 3)
    throw std::invalid_argument("AE_BENCH_ARCHS: '" + text + "' is not CxHxW:channels");
  return ae::Architecture(C, H, W, ae::Architecture::parse_channels(text.substr(colon + 1)));
}
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

TEST(BenchGpu, DISABLED_TrainEpochAndEncode) {
  REQUIRE_GPU();
  const int n = env_int("AE_BENCH_IMAGES", 50000), n_enc = env_int("AE_BENCH_ENCODE", 60000);
  const bool profile_only = env_int("AE_BENCH_PROFILE_ONLY", 0) != 0;
  const std::string only = env_str("AE_BENCH_PRECISION", "");
  const std::string stage = env_str("AE_BENCH_PROFILE_STAGE", "");
  const int profile_batch = env_int("AE_BENCH_PROFILE_BATCH", 256);
  std::vector<int> batches;
  for (const std::string& b : split(env_str("AE_BENCH_BATCHES", "64,256"), ',')) batches.push_back(std::atoi(b.c_str()));

  for (const std::string& spec : split(env_str("AE_BENCH_ARCHS", "3x32x32:256,128;1x28x28:64,32;3x32x32:96,48,24"), ';')) {
    const ae::Architecture arch = parse_arch(spec);
    const std::string arch_key = std::to_string(arch.input_channels()) + "x" + std::to_string(arch.height()) + "x" +
                                 std::to_string(arch.width()) + ":" + arch.channels_string();
    // Random pixels: speed does not depend on the image content (no data-dependent paths).
    std::vector<uint8_t> images(size_t(std::max(n, n_enc)) * size_t(arch.image_dim()));
    std::mt19937_64 rng(1);
    for (auto& b : images) b = uint8_t(rng() >> 56);
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<float> latent;

    for (ae::Precision p : {ae::Precision::fp32, ae::Precision::bf16}) {
      if (!only.empty() && only != ae::precision_name(p)) continue;
      ae::OptimizerConfig adam;
      auto backend = std::make_unique<ae::cuda::GpuBackend>(arch, adam, p);
      ae::AeBackend* gpu = backend.get();
      gpu->set_params(ae::init_params(arch, 0));
      gpu->set_train_images(images.data(), n);
      if (!stage.empty()) {
        std::printf("%s", profile_training_step(*backend, profile_batch, 1, stage).c_str());
        continue;
      }
      if (!profile_only) {
        for (int batch : batches) {
          // warm-up: graph capture, first touches
          std::vector<int64_t> warm(order.begin(), order.begin() + std::min<size_t>(order.size(), size_t(batch) * 20));
          gpu->train_epoch(warm, batch, 1e-3f, {});
          const double t0 = now();
          const double loss = gpu->train_epoch(order, batch, 1e-3f, {});
          const double dt = now() - t0;
          std::printf("BENCH train arch=%s precision=%s batch=%d images=%d s_per_epoch=%.4f loss=%.5f\n",
                      arch_key.c_str(), ae::precision_name(p), batch, n, dt, loss);
        }
        latent.resize(size_t(n_enc) * size_t(arch.latent_dim()));
        gpu->encode(images.data(), std::min(n_enc, 2048), 1024, latent.data());  // warm-up
        const double t0 = now();
        gpu->encode(images.data(), n_enc, 1024, latent.data());
        const double dt = now() - t0;
        std::printf("BENCH encode arch=%s precision=%s images=%d seconds=%.4f\n", arch_key.c_str(),
                    ae::precision_name(p), n_enc, dt);
      }
      std::printf("%s", profile_training_step(*backend, profile_batch, 20, "").c_str());
      std::fflush(stdout);
    }
  }
}

}  // namespace
