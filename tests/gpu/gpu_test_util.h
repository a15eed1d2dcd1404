// Helpers shared by the GPU tests: skipping without a GPU, device round trips, random
// data, relative errors.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.cuh"
#include "kernels/ae/model.h"

namespace gpu_test {

// The architectures the GPU tests run: the seed model, a grey 28×28 one (odd 7×7 latent,
// one input channel) and a deeper one whose channel counts are not powers of two.
struct ArchCase {
  const char* name;
  ae::Architecture arch;
};
inline const std::vector<ArchCase>& archs() {
  static const std::vector<ArchCase> v = {
      {"seed", ae::Architecture::seed()},
      {"gray28_64_32", ae::Architecture(1, 28, 28, {64, 32})},
      {"rgb32_96_48_24", ae::Architecture(3, 32, 32, {96, 48, 24})},
  };
  return v;
}

inline bool have_gpu(std::string* why = nullptr) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = cudaGetErrorString(err);
    return false;
  }
  if (n == 0 && why) *why = "no device";
  return n > 0;
}

#define REQUIRE_GPU()                                                              \
  do {                                                                             \
    std::string why_;                                                              \
    if (!::gpu_test::have_gpu(&why_)) GTEST_SKIP() << "no CUDA GPU (" << why_ << "): GPU test skipped"; \
  } while (0)

template <typename T>
cae::cuda::DeviceBuffer<T> to_device(const std::vector<T>& h) {
  cae::cuda::DeviceBuffer<T> d(h.size());
  AE_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> to_host(const cae::cuda::DeviceBuffer<T>& d, size_t n) {
  std::vector<T> h(n);
  AE_CUDA_CHECK(cudaMemcpy(h.data(), d.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// A device buffer filled with NaN, so an element the kernel forgets to write fails the test.
inline cae::cuda::DeviceBuffer<float> poisoned(size_t n) {
  std::vector<float> h(n, std::nanf(""));
  return to_device(h);
}

inline std::vector<float> normal(size_t n, float stddev, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<float> uniform(size_t n, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// ‖got − ref‖ / ‖ref‖ in double; NaN anywhere gives +inf.
inline double rel_err(const float* got, const float* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
inline double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  return rel_err(got.data(), ref.data(), std::min(got.size(), ref.size()));
}

// Smooth synthetic "photos": a few random low-frequency waves per channel plus noise,
// as uint8 NCHW [n][C][H][W] — structured enough that an autoencoder's loss falls as it
// trains.
inline std::vector<uint8_t> synthetic_images(int n, uint64_t seed, int C = 3, int H = 32, int W = 32) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  const size_t plane = size_t(H) * W, per_image = size_t(C) * plane;
  std::vector<uint8_t> img(size_t(n) * per_image);
  for (int i = 0; i < n; ++i) {
    const size_t nc = static_cast<size_t>(C);
    std::vector<float> fx(nc), fy(nc), ph(nc), amp(nc), base(nc);
    for (int c = 0; c < C; ++c) {
      fx[c] = 0.05f + 0.4f * u(rng);
      fy[c] = 0.05f + 0.4f * u(rng);
      ph[c] = 6.28f * u(rng);
      amp[c] = 40.f + 60.f * u(rng);
      base[c] = 70.f + 110.f * u(rng);
    }
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          float v = base[c] + amp[c] * std::sin(fx[c] * x + fy[c] * y + ph[c]) + 12.f * (u(rng) - 0.5f);
          v = std::min(255.f, std::max(0.f, v));
          img[size_t(i) * per_image + c * plane + size_t(y) * W + x] = uint8_t(v + 0.5f);
        }
  }
  return img;
}

}  // namespace gpu_test
