// The CPU autoencoder backend (kernels/ae/cpu/backend_cpu.cpp): initialisation, that its
// fused per-image pipeline equals the public layer functions composed step by step, and
// determinism. (Agreement with PyTorch is checked in tests/bats/ae.bats.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ae/model.h"
#include "kernels/ae/cpu/backend_cpu.h"
#include "kernels/ae/cpu/layers.h"

namespace {

std::vector<uint8_t> random_images(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> img(size_t(n) * ae::kImageDim);
  for (uint8_t& p : img) p = static_cast<uint8_t>(rng() & 255);
  return img;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

// The model composed from the unfused public layer functions of kernels/ae/cpu/layers.h.
struct Composed {
  std::vector<float> latent, out;
  Composed(const std::vector<float>& p, const std::vector<uint8_t>& images, int n) {
    using namespace ae::cpu;
    auto W = [&](int l) { return p.data() + ae::weight_offset(l); };
    auto B = [&](int l) { return p.data() + ae::bias_offset(l); };
    std::vector<float> x(images.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(images[i]) / 255.0f;
    std::vector<float> a1(size_t(n) * 256 * 1024), p1(size_t(n) * 256 * 256), a2(size_t(n) * 128 * 256);
    std::vector<int32_t> arg1(p1.size()), arg2(size_t(n) * ae::kLatentDim);
    latent.resize(size_t(n) * ae::kLatentDim);
    conv3x3_forward(x.data(), W(0), B(0), a1.data(), n, 3, 256, 32, 32, true);
    maxpool2_forward(a1.data(), p1.data(), arg1.data(), n, 256, 32, 32);
    conv3x3_forward(p1.data(), W(1), B(1), a2.data(), n, 256, 128, 16, 16, true);
    maxpool2_forward(a2.data(), latent.data(), arg2.data(), n, 128, 16, 16);
    std::vector<float> a3(size_t(n) * 128 * 64), u3(size_t(n) * 128 * 256), a4(size_t(n) * 256 * 256),
        u4(size_t(n) * 256 * 1024);
    out.resize(size_t(n) * ae::kImageDim);
    conv3x3_forward(latent.data(), W(2), B(2), a3.data(), n, 128, 128, 8, 8, true);
    upsample2_forward(a3.data(), u3.data(), n, 128, 8, 8);
    conv3x3_forward(u3.data(), W(3), B(3), a4.data(), n, 128, 256, 16, 16, true);
    upsample2_forward(a4.data(), u4.data(), n, 256, 16, 16);
    conv3x3_forward(u4.data(), W(4), B(4), out.data(), n, 256, 3, 32, 32, false);
  }
};

TEST(AeInit, HeNormalWeightsZeroBiasesSeeded) {
  const std::vector<float> p = ae::init_params(42);
  ASSERT_EQ(p.size(), size_t(ae::kParamCount));
  for (int l = 0; l < ae::kNumConvs; ++l) {
    const int64_t n = ae::weight_count(l);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = p[ae::weight_offset(l) + i];
      sum += v, sq += v * v;
    }
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    const double expect = std::sqrt(2.0 / (ae::kConvs[l].in * 9.0));
    EXPECT_NEAR(sd / expect, 1.0, 0.1) << "layer " << l;  // layer 0 has only 6,912 weights
    EXPECT_LT(std::fabs(mean), 0.1 * expect) << "layer " << l;
    for (int64_t i = 0; i < ae::bias_count(l); ++i) EXPECT_EQ(p[ae::bias_offset(l) + i], 0.0f);
  }
  EXPECT_EQ(ae::init_params(42), p);
  EXPECT_NE(ae::init_params(43), p);
}

TEST(AeBackend, EncodeAndReconstructEqualTheComposedLayers) {
  const int n = 3;
  std::vector<float> params = ae::init_params(5);
  for (int l = 0; l < ae::kNumConvs; ++l)  // non-zero biases, so they are exercised
    for (int64_t i = 0; i < ae::bias_count(l); ++i) params[ae::bias_offset(l) + i] = 0.01f * float((i % 7) - 3);
  const std::vector<uint8_t> images = random_images(n, 6);
  auto backend = ae::make_cpu_backend(ae::OptimizerConfig{}, 2);
  backend->set_params(params);
  std::vector<float> latent(size_t(n) * ae::kLatentDim), out(size_t(n) * ae::kImageDim);
  backend->encode(images.data(), n, 2, latent.data());
  backend->reconstruct(images.data(), n, out.data());
  Composed ref(params, images, n);
  EXPECT_LT(max_rel(latent, ref.latent), 1e-5);
  EXPECT_LT(max_rel(out, ref.out), 1e-5);

  // eval_loss is the mean per-image MSE of those reconstructions.
  double mse = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = out[i] - images[i] / 255.0;
    mse += d * d;
  }
  EXPECT_NEAR(backend->eval_loss(images.data(), n, 2), mse / double(out.size()), 1e-6 * mse);
}

TEST(AeBackend, TrainingIsDeterministicAndLowersTheLoss) {
  const int n = 24;
  const std::vector<uint8_t> images = random_images(n, 7);
  std::vector<int64_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = (i * 7) % n;
  auto run = [&](int threads, std::vector<double>* losses) {
    ae::OptimizerConfig oc;
    oc.grad_clip = 1.0f;
    auto b = ae::make_cpu_backend(oc, threads);
    b->set_params(ae::init_params(3));
    b->set_train_images(images.data(), n);
    int64_t calls = 0;
    for (int epoch = 0; epoch < 3; ++epoch)
      losses->push_back(b->train_epoch(order, 8, 1e-3f, [&](int64_t, double) { ++calls; }));
    EXPECT_EQ(calls, 9);  // one progress call per batch
    EXPECT_EQ(b->optimizer_state().step, 9);
    return b->params();
  };
  std::vector<double> la, lb, lc;
  const std::vector<float> a = run(2, &la), b = run(2, &lb), c = run(1, &lc);
  EXPECT_EQ(a, b);  // bit-identical with the same thread count
  EXPECT_EQ(la, lb);
  EXPECT_LT(max_rel(c, a), 1e-3);  // another thread count only reorders float sums
  EXPECT_LT(la[2], la[0]);
  for (double l : la) EXPECT_TRUE(std::isfinite(l));
}

TEST(AeBackend, GradientOfOneBatchIsTheSumOfItsHalves) {
  // The batch-mean gradient of 4 images = (gradient of images 0-1 + gradient of 2-3) / 2:
  // checks the per-thread split and the 2/(batch·3072) scaling.
  const std::vector<float> params = ae::init_params(9);
  const std::vector<uint8_t> images = random_images(4, 10);
  std::vector<float> g_all(ae::kParamCount), g_lo(ae::kParamCount), g_hi(ae::kParamCount);
  std::vector<float> out(4 * size_t(ae::kImageDim));
  const double l_all = ae::cpu_loss_and_gradient(params, images.data(), 4, 2, out.data(), g_all.data());
  const double l_lo = ae::cpu_loss_and_gradient(params, images.data(), 2, 1, out.data(), g_lo.data());
  const double l_hi =
      ae::cpu_loss_and_gradient(params, images.data() + 2 * ae::kImageDim, 2, 1, out.data(), g_hi.data());
  EXPECT_NEAR(l_all, (l_lo + l_hi) / 2, 1e-9);
  std::vector<float> mean(ae::kParamCount);
  for (int64_t i = 0; i < ae::kParamCount; ++i) mean[i] = (g_lo[i] + g_hi[i]) / 2;
  EXPECT_LT(max_rel(g_all, mean), 1e-5);
}

TEST(AeBackend, RejectsBadInput) {
  auto b = ae::make_cpu_backend(ae::OptimizerConfig{}, 1);
  EXPECT_THROW(b->set_params(std::vector<float>(10)), std::invalid_argument);
  ae::OptimizerState s;
  s.m.resize(5);
  EXPECT_THROW(b->set_optimizer_state(s), std::invalid_argument);
  const std::vector<uint8_t> images = random_images(2, 1);
  b->set_train_images(images.data(), 2);
  EXPECT_THROW(b->train_epoch({0, 2}, 1, 1e-3f, nullptr), std::out_of_range);
  ae::OptimizerConfig bad;
  bad.kind = "lbfgs";
  EXPECT_THROW(ae::make_cpu_backend(bad, 1), std::invalid_argument);
}

}  // namespace
