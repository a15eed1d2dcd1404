// The CPU autoencoder backend (kernels/ae/cpu/backend_cpu.cpp) on several architectures of
// the family: its fused per-image pipeline equals the whole-batch layer functions composed
// step by step, its gradient equals a double-precision reference backward
// (tests/support/layer_reference.h) and, on tiny architectures, finite differences of the whole network;
// training lowers the loss and is deterministic. (Agreement with PyTorch is checked in
// tests/bats/ae.bats.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/ae/augment.h"
#include "kernels/ae/backend.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/encoder.h"
#include "tests/support/cpu_gradient.h"
#include "tests/support/cpu_layers.h"
#include "tests/support/layer_reference.h"
#include "tests/support/temp_dir.h"
#include "kernels/ae/model.h"

namespace {

using ae::Architecture;
using ae::ConvLayer;

std::vector<uint8_t> random_images(const Architecture& arch, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> img(size_t(n) * size_t(arch.image_dim()));
  for (uint8_t& p : img) p = static_cast<uint8_t>(rng() & 255);
  return img;
}

// init_params with small non-zero biases: they are exercised, and no pre-activation is
// exactly zero (a decoder unit whose receptive field the ReLUs zeroed would otherwise sit
// on its kink, where finite differences see half the slope).
std::vector<float> params_with_biases(const Architecture& arch, uint64_t seed) {
  std::vector<float> p = ae::init_params(arch, seed);
  std::mt19937 rng(uint32_t(seed) + 1000);
  std::uniform_real_distribution<float> u(0.02f, 0.1f);
  for (const ConvLayer& l : arch.convs())
    for (int64_t i = 0; i < l.bias_count(); ++i) p[size_t(l.bias_offset + i)] = (rng() & 1 ? 1.0f : -1.0f) * u(rng);
  return p;
}

template <typename A, typename B>
double max_rel(const A& a, const B& b, size_t count, size_t a_off = 0, size_t b_off = 0) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < count; ++i) {
    diff = std::max(diff, std::fabs(double(a[a_off + i]) - double(b[b_off + i])));
    scale = std::max(scale, std::fabs(double(b[b_off + i])));
  }
  return diff / scale;
}
double max_rel(const std::vector<float>& a, const std::vector<float>& b) { return max_rel(a, b, b.size()); }

// The model composed from the unfused whole-batch layer functions of tests/support/cpu_layers.h
// (conv with its ReLU, then pool; upsample, then conv), in float.
struct Composed {
  std::vector<float> latent, out;
  Composed(const Architecture& arch, const std::vector<float>& p, const std::vector<uint8_t>& images, int n) {
    using namespace ae::cpu;
    const int k = arch.depth();
    std::vector<float> a(images.size());
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(images[i]) / 255.0f;
    for (int l = 0; l < arch.num_convs(); ++l) {
      const ConvLayer& c = arch.conv(l);
      if (c.upsample) {
        std::vector<float> up(size_t(n) * c.in * c.H * c.W);
        upsample2_forward(a.data(), up.data(), n, c.in, c.H / 2, c.W / 2);
        a.swap(up);
      }
      std::vector<float> y(size_t(n) * c.out * c.H * c.W);
      conv3x3_forward(a.data(), p.data() + c.weight_offset, p.data() + c.bias_offset, y.data(), n, c.in, c.out, c.H,
                      c.W, c.relu);
      if (c.pool) {
        std::vector<float> pooled(y.size() / 4);
        std::vector<int32_t> arg(pooled.size());
        maxpool2_forward(y.data(), pooled.data(), arg.data(), n, c.out, c.H, c.W);
        y.swap(pooled);
      }
      a.swap(y);
      if (l == k - 1) latent = a;
    }
    out = a;
  }
};

// The whole network in double precision from reference.h: forward, loss (batch-mean MSE
// against the input) and the backward pass through its own decisions.
struct DoubleNet {
  const Architecture& arch;
  explicit DoubleNet(const Architecture& a) : arch(a) {}

  struct Tape {  // per layer: its input (after any upsampling), pre-activation, output
    std::vector<std::vector<double>> in, pre, act;
    std::vector<std::vector<int32_t>> arg;
    std::vector<double> x, out;
  };

  double loss(const std::vector<double>& p, const std::vector<uint8_t>& images, int n, Tape* tape = nullptr) const {
    Tape local;
    Tape& t = tape ? *tape : local;
    t = Tape{};
    t.x.resize(images.size());
    for (size_t i = 0; i < images.size(); ++i) t.x[i] = double(static_cast<float>(images[i]) / 255.0f);
    std::vector<double> a = t.x;
    for (const ConvLayer& c : arch.convs()) {
      if (c.upsample) {
        std::vector<double> up(size_t(n) * c.in * c.H * c.W);
        ae::ref::upsample2_forward(a.data(), up.data(), n, c.in, c.H / 2, c.W / 2);
        a.swap(up);
      }
      t.in.push_back(a);
      std::vector<double> z(size_t(n) * c.out * c.H * c.W);
      ae::ref::conv3x3_forward(a.data(), p.data() + c.weight_offset, p.data() + c.bias_offset, z.data(), n, c.in, c.out,
                               c.H, c.W, false);
      t.pre.push_back(z);
      if (c.relu)
        for (double& v : z) v = std::max(v, 0.0);
      std::vector<int32_t> arg;
      if (c.pool) {
        std::vector<double> pooled(z.size() / 4);
        arg.resize(pooled.size());
        ae::ref::maxpool2_forward(z.data(), pooled.data(), arg.data(), n, c.out, c.H, c.W);
        z.swap(pooled);
      }
      t.arg.push_back(arg);
      t.act.push_back(z);
      a = z;
    }
    t.out = a;
    return ae::ref::mse_loss(t.out.data(), t.x.data(), int64_t(t.x.size()), static_cast<double*>(nullptr));
  }

  std::vector<double> gradient(const std::vector<double>& p, const std::vector<uint8_t>& images, int n) const {
    Tape t;
    loss(p, images, n, &t);
    std::vector<double> grad(p.size()), dy(t.out.size());
    ae::ref::mse_loss(t.out.data(), t.x.data(), int64_t(t.x.size()), dy.data());
    for (int l = arch.num_convs() - 1; l >= 0; --l) {
      const ConvLayer& c = arch.conv(l);
      if (c.pool) {
        std::vector<double> d(size_t(n) * c.out * c.H * c.W);
        ae::ref::maxpool2_backward(dy.data(), t.arg[l].data(), d.data(), n, c.out, c.H, c.W);
        dy.swap(d);
      }
      if (c.relu)
        for (size_t i = 0; i < dy.size(); ++i)
          if (t.pre[l][i] <= 0) dy[i] = 0;
      ae::ref::conv3x3_backward_weights(t.in[l].data(), dy.data(), grad.data() + c.weight_offset,
                                        grad.data() + c.bias_offset, n, c.in, c.out, c.H, c.W);
      if (l == 0) break;
      std::vector<double> dx(t.in[l].size());
      ae::ref::conv3x3_backward_data(dy.data(), p.data() + c.weight_offset, dx.data(), n, c.in, c.out, c.H, c.W);
      if (c.upsample) {
        std::vector<double> d(dx.size() / 4);
        ae::ref::upsample2_backward(dx.data(), d.data(), n, c.in, c.H / 2, c.W / 2);
        dx.swap(d);
      }
      dy.swap(dx);
    }
    return grad;
  }
};

// Σ_i [9·c(i−1)·c(i) + c(i)] over the encoder, the decoder's conv c(k)→c(k), its mirrored
// convs c(i)→c(i−1) and the output conv c(1)→C.
int64_t param_count_formula(int C, const std::vector<int>& ch) {
  auto conv = [](int64_t in, int64_t out) { return 9 * in * out + out; };
  int64_t total = 0, prev = C;
  for (int c : ch) total += conv(prev, c), prev = c;
  total += conv(ch.back(), ch.back());
  for (size_t i = ch.size() - 1; i >= 1; --i) total += conv(ch[i], ch[i - 1]);
  return total + conv(ch.front(), C);
}

TEST(AeArchitecture, ParamCountAndLatentShape) {
  EXPECT_EQ(Architecture::seed().param_count(), 751875);
  EXPECT_EQ(Architecture::seed().latent_dim(), 8192);
  struct Case {
    int C, H, W;
    std::vector<int> ch;
    int64_t latent;
  } cases[] = {{3, 32, 32, {256, 128}, 8192},
               {1, 28, 28, {64, 32}, 32 * 7 * 7},
               {3, 32, 32, {96, 48, 24}, 384},
               {1, 16, 24, {8}, 8 * 8 * 12},
               {3, 32, 32, {64, 32}, 2048},
               {2, 4, 8, {1, 1}, 1 * 1 * 2}};
  for (const Case& c : cases) {
    const Architecture arch(c.C, c.H, c.W, c.ch);
    EXPECT_EQ(arch.param_count(), param_count_formula(c.C, c.ch)) << arch.describe();
    EXPECT_EQ(arch.latent_dim(), c.latent) << arch.describe();
    // The layers tile the parameter array without gaps, in order.
    int64_t offset = 0;
    for (const ConvLayer& l : arch.convs()) {
      EXPECT_EQ(l.weight_offset, offset);
      EXPECT_EQ(l.bias_offset, offset + l.weight_count());
      offset = l.bias_offset + l.bias_count();
    }
    EXPECT_EQ(offset, arch.param_count());
  }
}

TEST(AeInit, HeNormalWeightsZeroBiasesSeeded) {
  const Architecture arch = Architecture::seed();
  const std::vector<float> p = ae::init_params(arch, 42);
  ASSERT_EQ(p.size(), size_t(arch.param_count()));
  for (const ConvLayer& l : arch.convs()) {
    const int64_t n = l.weight_count();
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = p[size_t(l.weight_offset + i)];
      sum += v, sq += v * v;
    }
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    const double expect = std::sqrt(2.0 / (l.in * 9.0));
    EXPECT_NEAR(sd / expect, 1.0, 0.1) << l.group;  // encoder conv1 has only 6,912 weights
    EXPECT_LT(std::fabs(mean), 0.1 * expect) << l.group;
    for (int64_t i = 0; i < l.bias_count(); ++i) EXPECT_EQ(p[size_t(l.bias_offset + i)], 0.0f);
  }
  EXPECT_EQ(ae::init_params(arch, 42), p);
  EXPECT_NE(ae::init_params(arch, 43), p);
}

// ---- every architecture ---------------------------------------------------------------
struct ArchCase {
  const char* name;
  int C, H, W;
  std::vector<int> channels;
  int images;  // for the gradient checks (the seed's double reference is slow)
};
const ArchCase kArchs[] = {
    {"seed_3x32x32_256_128", 3, 32, 32, {256, 128}, 1},
    {"mnist_1x28x28_64_32", 1, 28, 28, {64, 32}, 3},
    {"deep_3x32x32_96_48_24", 3, 32, 32, {96, 48, 24}, 2},
    {"k1_nonsquare_1x16x24_8", 1, 16, 24, {8}, 3},
    {"nonsquare_3x8x12_100_48", 3, 8, 12, {100, 48}, 2},
};

class AeBackendArch : public testing::TestWithParam<ArchCase> {
 protected:
  Architecture arch() const {
    const ArchCase& c = GetParam();
    return Architecture(c.C, c.H, c.W, c.channels);
  }
};

TEST_P(AeBackendArch, EncodeAndReconstructEqualTheComposedLayers) {
  const Architecture a = arch();
  const int n = 3;
  const std::vector<float> params = params_with_biases(a, 5);
  const std::vector<uint8_t> images = random_images(a, n, 6);
  auto backend = ae::make_cpu_backend(a, ae::OptimizerConfig{}, 2);
  EXPECT_EQ(backend->architecture(), a);
  backend->set_params(params);
  // encode writes exactly n × latent_dim values: a sentinel after them stays untouched.
  const size_t latent_n = size_t(n) * size_t(a.latent_dim());
  std::vector<float> latent(latent_n + 1, std::numeric_limits<float>::quiet_NaN()), out(size_t(n) * a.image_dim());
  backend->encode(images.data(), n, 2, latent.data());
  backend->reconstruct(images.data(), n, out.data());
  EXPECT_TRUE(std::isnan(latent.back()));
  latent.pop_back();
  for (float v : latent) ASSERT_TRUE(std::isfinite(v));
  Composed ref(a, params, images, n);
  ASSERT_EQ(ref.latent.size(), latent_n);
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

TEST_P(AeBackendArch, GradientAndDecisionsMatchTheDoubleReference) {
  const Architecture a = arch();
  const int n = GetParam().images;
  const std::vector<float> params = params_with_biases(a, 7);
  const std::vector<uint8_t> images = random_images(a, n, 8);
  std::vector<float> out(size_t(n) * a.image_dim()), grad(size_t(a.param_count()));
  const double loss = ae::cpu_loss_and_gradient(a, params, images.data(), n, 2, out.data(), grad.data());

  const DoubleNet net(a);
  const std::vector<double> pd(params.begin(), params.end());
  DoubleNet::Tape tape;
  const double loss_ref = net.loss(pd, images, n, &tape);
  const std::vector<double> grad_ref = net.gradient(pd, images, n);
  EXPECT_NEAR(loss, loss_ref, 1e-5 * loss_ref);
  EXPECT_LT(max_rel(out, tape.out, out.size()), 1e-5);
  for (const ConvLayer& l : a.convs()) {
    EXPECT_LT(max_rel(grad, grad_ref, size_t(l.weight_count()), size_t(l.weight_offset), size_t(l.weight_offset)), 1e-4)
        << l.group << " weight";
    EXPECT_LT(max_rel(grad, grad_ref, size_t(l.bias_count()), size_t(l.bias_offset), size_t(l.bias_offset)), 1e-4)
        << l.group << " bias";
  }

  // The forward traces: one per image, each layer's the double reference's (pool picks
  // where the window's maximum is positive; ReLU outputs).
  const int k = a.depth();
  const std::vector<ae::ForwardTrace> traces = ae::cpu_forward_traces(a, params, images.data(), n);
  ASSERT_EQ(traces.size(), size_t(n));
  auto all_images = [&](auto member, int layer) {
    std::vector<std::decay_t<decltype((traces[0].*member)[0][0])>> v;
    for (const ae::ForwardTrace& t : traces) {
      EXPECT_EQ(int((t.*member).size()), k);
      v.insert(v.end(), (t.*member)[size_t(layer)].begin(), (t.*member)[size_t(layer)].end());
    }
    return v;
  };
  for (int i = 0; i < k; ++i) {
    const ConvLayer& l = a.conv(i);
    const size_t count = size_t(n) * size_t(l.out) * size_t(l.H / 2) * size_t(l.W / 2);
    const std::vector<int32_t> arg = all_images(&ae::ForwardTrace::pool_argmax, i);
    const std::vector<float> pool = all_images(&ae::ForwardTrace::pool, i);
    ASSERT_EQ(arg.size(), count);
    ASSERT_EQ(pool.size(), count);
    EXPECT_LT(max_rel(pool, tape.act[size_t(i)], count), 1e-5) << "pool" << i + 1;
    int64_t differ = 0;
    for (size_t e = 0; e < count; ++e) differ += pool[e] > 0 && arg[e] != tape.arg[size_t(i)][e];
    EXPECT_EQ(differ, 0) << "pool" << i + 1 << "_argmax";
  }
  for (int j = 0; j < k; ++j) {
    const ConvLayer& l = a.conv(k + j);
    const std::vector<float> relu = all_images(&ae::ForwardTrace::relu, j);
    ASSERT_EQ(relu.size(), size_t(n) * l.out * l.H * l.W);
    EXPECT_LT(max_rel(relu, tape.act[size_t(k + j)], relu.size()), 1e-5) << "dconv" << j + 1;
  }
}

TEST_P(AeBackendArch, TrainingIsDeterministicAndLowersTheLoss) {
  const Architecture a = arch();
  const int n = 24;
  const std::vector<uint8_t> images = random_images(a, n, 7);
  std::vector<int64_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = (i * 7) % n;
  auto run = [&](int threads, std::vector<double>* losses) {
    ae::OptimizerConfig oc;
    oc.grad_clip = 1.0f;
    auto b = ae::make_cpu_backend(a, oc, threads);
    b->set_params(ae::init_params(a, 3));
    b->set_train_images(images.data(), n);
    int64_t calls = 0;
    for (int epoch = 0; epoch < 3; ++epoch)
      losses->push_back(b->train_epoch(order, 8, 1e-3f, [&](int64_t, double) { ++calls; }));
    EXPECT_EQ(calls, 9);  // one progress call per batch
    EXPECT_EQ(b->optimizer_state().step, 9);
    EXPECT_EQ(b->optimizer_state().m.size(), size_t(a.param_count()));
    return b->params();
  };
  std::vector<double> la, lb, lc;
  const std::vector<float> pa = run(2, &la), pb = run(2, &lb), pc = run(1, &lc);
  EXPECT_EQ(pa, pb);  // bit-identical with the same thread count
  EXPECT_EQ(la, lb);
  EXPECT_LT(max_rel(pc, pa), 1e-3);  // another thread count only reorders float sums
  EXPECT_LT(la[2], la[0]);
  for (double l : la) EXPECT_TRUE(std::isfinite(l));
}

INSTANTIATE_TEST_SUITE_P(Architectures, AeBackendArch, testing::ValuesIn(kArchs),
                         [](const testing::TestParamInfo<ArchCase>& p) { return std::string(p.param.name); });

// ---- the whole network against finite differences, on tiny architectures ---------------
TEST(AeBackend, WholeNetworkGradientMatchesFiniteDifferences) {
  // Every parameter: k = 1, 2, 3; non-square; 1 and 3 input channels; a 1-channel layer.
  const Architecture archs[] = {Architecture(1, 4, 6, {3}), Architecture(2, 8, 12, {3, 4}),
                                Architecture(3, 8, 8, {2, 1, 3})};
  for (const Architecture& a : archs) {
    const int n = 2;
    const std::vector<float> params = params_with_biases(a, 11);
    const std::vector<uint8_t> images = random_images(a, n, 12);
    std::vector<float> grad(size_t(a.param_count()));
    ae::cpu_loss_and_gradient(a, params, images.data(), n, 2, nullptr, grad.data());
    const DoubleNet net(a);
    std::vector<double> p(params.begin(), params.end());
    const double h = 1e-6;
    for (const ConvLayer& l : a.convs()) {
      double diff = 0, scale = 1e-30;
      for (int64_t i = l.weight_offset; i < l.bias_offset + l.bias_count(); ++i) {
        const double keep = p[size_t(i)];
        p[size_t(i)] = keep + h;
        const double up = net.loss(p, images, n);
        p[size_t(i)] = keep - h;
        const double down = net.loss(p, images, n);
        p[size_t(i)] = keep;
        const double fd = (up - down) / (2 * h);
        diff = std::max(diff, std::fabs(fd - grad[size_t(i)]));
        scale = std::max(scale, std::fabs(fd));
      }
      EXPECT_LT(diff / scale, 1e-4) << a.describe() << " " << l.group;
      EXPECT_GT(scale, 1e-6) << a.describe() << " " << l.group;  // the gradient is not trivially zero
    }
  }
}

TEST(AeBackend, GradientOfOneBatchIsTheSumOfItsHalves) {
  // The batch-mean gradient of 4 images = (gradient of images 0-1 + gradient of 2-3) / 2:
  // checks the per-thread split and the 2/(batch·image_dim) scaling.
  for (const Architecture& a : {Architecture::seed(), Architecture(1, 16, 24, {8})}) {
    const std::vector<float> params = ae::init_params(a, 9);
    const std::vector<uint8_t> images = random_images(a, 4, 10);
    const size_t count = size_t(a.param_count());
    std::vector<float> g_all(count), g_lo(count), g_hi(count), out(4 * size_t(a.image_dim()));
    const double l_all = ae::cpu_loss_and_gradient(a, params, images.data(), 4, 2, out.data(), g_all.data());
    const double l_lo = ae::cpu_loss_and_gradient(a, params, images.data(), 2, 1, out.data(), g_lo.data());
    const double l_hi =
        ae::cpu_loss_and_gradient(a, params, images.data() + 2 * a.image_dim(), 2, 1, out.data(), g_hi.data());
    EXPECT_NEAR(l_all, (l_lo + l_hi) / 2, 1e-9);
    std::vector<float> mean(count);
    for (size_t i = 0; i < count; ++i) mean[i] = (g_lo[i] + g_hi[i]) / 2;
    EXPECT_LT(max_rel(g_all, mean), 1e-5) << a.describe();
  }
}

TEST(AeBackend, RejectsBadInput) {
  const Architecture a(1, 16, 24, {8});
  auto b = ae::make_cpu_backend(a, ae::OptimizerConfig{}, 1);
  EXPECT_THROW(b->set_params(std::vector<float>(10)), std::invalid_argument);
  EXPECT_THROW(b->set_params(ae::init_params(Architecture::seed(), 1)), std::invalid_argument);
  ae::OptimizerState s;
  s.m.resize(5);
  EXPECT_THROW(b->set_optimizer_state(s), std::invalid_argument);
  const std::vector<uint8_t> images = random_images(a, 2, 1);
  b->set_train_images(images.data(), 2);
  EXPECT_THROW(b->train_epoch({0, 2}, 1, 1e-3f, nullptr), std::out_of_range);
  EXPECT_THROW(b->train_epoch({0, 1}, 0, 1e-3f, nullptr), std::invalid_argument);
  ae::OptimizerConfig bad;
  bad.kind = "lbfgs";
  EXPECT_THROW(ae::make_cpu_backend(a, bad, 1), std::invalid_argument);
  std::vector<float> grad(size_t(a.param_count()));
  EXPECT_THROW(ae::cpu_loss_and_gradient(a, ae::init_params(a, 1), images.data(), 0, 1, nullptr, grad.data()),
               std::invalid_argument);
}

}  // namespace

namespace {

// A model file with `params` (no samples, no history) in `dir`: what Encoder reads.
std::string write_model(const cae_test::TempDir& dir, const Architecture& arch, const std::vector<float>& params) {
  const std::string path = dir.file("model.h5");
  ae::Checkpoint c;
  c.arch = arch;
  c.params = params;
  c.optimizer_kind = "adam";
  ae::write_checkpoint(path, path, c, cae::Provenance{"ae-model", 1, "{}", {}});
  return path;
}

}  // namespace

// Encoder: the backend's codes of the images, and of their mirrors when asked.
TEST(Encoder, CodesAndMirroredCodesAreTheBackendsOfTheImagesAndTheirMirrors) {
  const Architecture arch(3, 8, 8, {4, 2});
  const std::vector<float> params = params_with_biases(arch, 3);
  const cae_test::TempDir dir("cae-encoder");
  const std::string path = write_model(dir, arch, params);
  const int n = 5;
  const std::vector<uint8_t> images = random_images(arch, n, 9);
  std::vector<uint8_t> mirrored(images.size());
  ae::flip_horizontal(images.data(), n, 3, 8, 8, mirrored.data());
  auto backend = ae::make_backend(cae::Device::cpu, arch, ae::OptimizerConfig{}, ae::Precision::fp32, 1);
  backend->set_params(params);
  const size_t dim = size_t(arch.latent_dim());
  std::vector<float> want(n * dim), want_mirrored(n * dim);
  backend->encode(images.data(), n, 2, want.data());
  backend->encode(mirrored.data(), n, 2, want_mirrored.data());
  EXPECT_NE(want, want_mirrored);

  ae::Encoder encoder(path, cae::Device::cpu, 1, 2);
  EXPECT_EQ(encoder.architecture(), arch);
  std::vector<float> codes(n * dim), codes_mirrored(n * dim);
  encoder.encode(images.data(), n, codes.data(), codes_mirrored.data(), "test", 0);
  EXPECT_EQ(codes, want);
  EXPECT_EQ(codes_mirrored, want_mirrored);
  std::vector<float> alone(n * dim);
  encoder.encode(images.data(), n, alone.data(), nullptr, "test", 0);
  EXPECT_EQ(alone, want);
  EXPECT_THROW(encoder.check_input("d.h5", 3, 8, 16, "3x8x16"), std::runtime_error);
  EXPECT_NO_THROW(encoder.check_input("d.h5", 3, 8, 8, "3x8x8"));
}

// Weights that overflow on an image give a non-finite code: refused, naming the image.
TEST(Encoder, RefusesNonFiniteCodesNamingTheImage) {
  const Architecture arch(1, 4, 4, {2});
  std::vector<float> params = ae::init_params(arch, 1);
  for (int64_t i = 0; i < arch.conv(0).weight_count(); ++i) params[size_t(arch.conv(0).weight_offset + i)] = 3e38f;
  const cae_test::TempDir dir("cae-encoder");
  const std::string path = write_model(dir, arch, params);
  std::vector<uint8_t> images(size_t(2 * arch.image_dim()), 0);
  std::fill(images.begin() + arch.image_dim(), images.end(), uint8_t(255));  // image 1 overflows, image 0 is black
  ae::Encoder encoder(path, cae::Device::cpu, 1, 2);
  std::vector<float> codes(size_t(2 * arch.latent_dim()));
  try {
    encoder.encode(images.data(), 2, codes.data(), nullptr, "test", 10);
    ADD_FAILURE() << "accepted an infinite code";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("model.h5: its encoder gives a non-finite feature (test image 11, feature"),
              std::string::npos)
        << e.what();
  }
}

// The CPU's encode_halves (AeBackend's own, a chunk at a time) and Encoder::encode_view_halves:
// the codes rounded as floats_to_halves rounds encode()'s; a finite code beyond ±65504 is
// CodeBeyondHalf naming the first; a non-finite code is the model's error even where a finite
// one beyond the range comes first in its chunk.
TEST(Encoder, HalfCodesAreTheRoundedCodesAndTheirFirstBadOneIsNamed) {
  const Architecture arch(1, 4, 4, {2});
  const cae_test::TempDir dir("cae-encoder-halves");
  const int n = 5;
  const std::vector<uint8_t> images = random_images(arch, n, 8);
  const size_t count = size_t(n) * size_t(arch.latent_dim());
  {
    ae::Encoder encoder(write_model(dir, arch, ae::init_params(arch, 2)), cae::Device::cpu, 1, 2);
    std::vector<float> codes(count);
    std::vector<cae::Half> want(count), got(count);
    encoder.encode(images.data(), n, codes.data(), nullptr, "test", 0);
    ASSERT_EQ(cae::floats_to_halves(codes.data(), want.data(), count), count);
    encoder.encode_view_halves(images.data(), n, {}, got.data(), "test", 0);
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i].bits, want[i].bits) << i;
  }
  // Every weight 1e5 times its size: finite codes, some beyond float16's range.
  std::vector<float> params = ae::init_params(arch, 2);
  for (float& p : params) p *= 1e5f;
  ae::Encoder large(write_model(dir, arch, params), cae::Device::cpu, 1, 2);
  std::vector<float> codes(count);
  large.encode(images.data(), n, codes.data(), nullptr, "test", 0);
  std::vector<cae::Half> halves(count);
  const size_t first = cae::floats_to_halves(codes.data(), halves.data(), count);
  ASSERT_LT(first, count);
  try {
    large.encode_view_halves(images.data(), n, {}, halves.data(), "test", 7);
    ADD_FAILURE() << "a code beyond float16's range was rounded";
  } catch (const ae::CodeBeyondHalf& e) {
    EXPECT_EQ(e.row, 7 + int64_t(first) / arch.latent_dim());
    EXPECT_EQ(e.feature, int64_t(first) % arch.latent_dim());
    EXPECT_EQ(e.value, codes[first]);
  }
  // Image 1 overflows float32 in every code; image 0's codes are finite but beyond the range.
  for (int64_t i = 0; i < arch.conv(0).weight_count(); ++i) params[size_t(arch.conv(0).weight_offset + i)] = 3e38f;
  std::vector<uint8_t> two(size_t(2 * arch.image_dim()), uint8_t(1));
  std::fill(two.begin() + arch.image_dim(), two.end(), uint8_t(255));
  ae::Encoder diverged(write_model(dir, arch, params), cae::Device::cpu, 1, 2);
  {
    std::vector<float> raw(size_t(2 * arch.latent_dim()));
    try {
      diverged.encode(two.data(), 1, raw.data(), nullptr, "test", 10);  // image 0 alone: finite
    } catch (const std::runtime_error& e) {
      FAIL() << "image 0's codes should be finite: " << e.what();
    }
    ASSERT_TRUE(std::any_of(raw.begin(), raw.begin() + arch.latent_dim(),
                            [](float x) { return std::fabs(x) >= cae::kHalfOverflow; }));
  }
  try {
    diverged.encode_view_halves(two.data(), 2, {}, halves.data(), "test", 10);
    ADD_FAILURE() << "a non-finite code was rounded";
  } catch (const ae::CodeBeyondHalf& e) {
    ADD_FAILURE() << "a non-finite code was called beyond float16's range: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("its encoder gives a non-finite feature (test image 11,"), std::string::npos)
        << e.what();
  }
}
