// Every layer of the GPU backend's plan (kernels/ae/cuda/plan.h) against the CPU twins of
// kernels/ae/cpu/layers.h: the same bound ConvArgs / weight-gradient operations that a
// training step runs — fused epilogues included (bias+ReLU+pool with its picks and the
// latent copy, bias+ReLU, loss with its gradient and reconstruction, ReLU mask, mask +
// max-unpool, the unpooled and folded weight-gradient operands, the bias gradients) — for
// the seed model and two other architectures, in fp32 (TF32) and bf16.
//
// Each case fills the operation's input tensors with random data (never all zero; ReLU
// outputs with about half zeros; random pool picks), runs it alone, and compares the
// tensor it writes with the CPU computation of the same layer.
// Tolerances (‖gpu − cpu‖ / ‖cpu‖): 1e-3 TF32, 1e-2 bf16 (2e-2 for bf16 outputs that are
// differences, the loss gradient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/ae/cpu/layers.h"
#include "kernels/ae/cuda/ops.cuh"
#include "kernels/ae/cuda/plan.h"
#include "kernels/ae/model.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/support/layer_twins.cuh"
#include "tests/gpu/support/plan_table.cuh"

using namespace gpu_test;
using ae::Precision;
using namespace ae::cuda;
using cae::cuda::DeviceBuffer;

namespace {

constexpr int kImages = 3;  // odd: the last GEMM tile of every layer is partial

// gpu_test::archs() and two more that only these per-layer checks run: 1×20×12 with 100,5
// (non-square, a 5×3 latent, 100 channels at pitch 128 and 5 at pitch 8), and 5×8×8 with 48
// (the first layer's im2col 46 columns wide: its weight gradient takes the 128-column tiles,
// on Hopper the warpgroup-MMA kernel with the unpooled operand).
const std::vector<ArchCase>& plan_archs() {
  static const std::vector<ArchCase> v = [] {
    std::vector<ArchCase> a = archs();
    a.push_back({"a1x20x12_100_5", ae::Architecture(1, 20, 12, {100, 5})});
    a.push_back({"a5x8x8_48", ae::Architecture(5, 8, 8, {48})});
    return a;
  }();
  return v;
}


struct LayerCase {
  int arch, layer;
  Precision precision;
};
std::string case_name(const testing::TestParamInfo<LayerCase>& info) {
  const auto& a = plan_archs()[size_t(info.param.arch)];
  return std::string(a.name) + "_" + a.arch.conv(info.param.layer).name + "_" + ae::precision_name(info.param.precision);
}
std::vector<LayerCase> all_cases() {
  std::vector<LayerCase> v;
  for (int a = 0; a < int(plan_archs().size()); ++a)
    for (int l = 0; l < plan_archs()[size_t(a)].arch.num_convs(); ++l)
      for (Precision p : {Precision::fp32, Precision::bf16}) v.push_back({a, l, p});
  return v;
}

double tolerance(Precision p) { return p == Precision::bf16 ? 1e-2 : 1e-3; }

class PlanLayer : public testing::TestWithParam<LayerCase> {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    arch_ = &plan_archs()[size_t(GetParam().arch)].arch;
    prec_ = GetParam().precision;
    dt_ = prec_ == Precision::bf16 ? DType::bf16 : DType::f32;
    plan_ = std::make_unique<Plan>(make_plan(*arch_, kImages, dt_));
    lp_ = &plan_->layers[size_t(GetParam().layer)];
    c_ = lp_->conv;
    rng_.seed(7000 + 100 * GetParam().arch + 10 * GetParam().layer + int(prec_));
    bufs_.allocate(*plan_, kImages, 0);
    packs_.allocate(*plan_, 0);
    // He-normal weights with random (non-zero) biases
    params_ = ae::init_params(*arch_, 17 + GetParam().layer);
    std::normal_distribution<float> nd(0.f, 0.1f);
    for (const ae::ConvLayer& cl : arch_->convs())
      for (int64_t i = 0; i < cl.bias_count(); ++i) params_[size_t(cl.bias_offset + i)] = nd(rng_);
    params_dev_ = to_device(params_);
    packs_.pack(params_dev_.get(), dt_, 0);
    AE_CUDA_CHECK(cudaDeviceSynchronize());
  }

  const float* w() const { return params_.data() + c_.weight_offset; }
  const float* b() const { return params_.data() + c_.bias_offset; }
  // The layer's source grid (its input, before any upsampling).
  int sh() const { return c_.upsample ? c_.H / 2 : c_.H; }
  int sw() const { return c_.upsample ? c_.W / 2 : c_.W; }

  // NCHW host data into plan tensor `id` (NHWC, its pitch), and back.
  void put(int id, const std::vector<float>& nchw, int channels) {
    const TensorSpec& t = plan_->tensors[size_t(id)];
    ASSERT_EQ(nchw.size(), size_t(kImages) * channels * t.H * t.W);
    auto d = to_device(nchw);
    twin::nchw_to_nhwc(d.get(), bufs_.get(id), kImages, channels, t.H * t.W, t.pitch, dt_, 0);
    AE_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Plan tensor `id` as NCHW host data (its real channels); its padding channels must be
  // zero (every epilogue writes them so: the next GEMM reads them).
  std::vector<float> take(int id) {
    const TensorSpec& t = plan_->tensors[size_t(id)];
    const int HW = t.H * t.W;
    const size_t all = size_t(kImages) * t.pitch * HW;
    DeviceBuffer<float> d(all);
    twin::nhwc_to_nchw(bufs_.get(id), d.get(), kImages, t.pitch, HW, t.pitch, dt_, 0);
    AE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> h = to_host(d, all);
    std::vector<float> v(size_t(kImages) * t.channels * HW);
    size_t pad_nonzero = 0;
    for (int n = 0; n < kImages; ++n)
      for (int c = 0; c < t.pitch; ++c)
        for (int p = 0; p < HW; ++p) {
          const float x = h[(size_t(n) * t.pitch + c) * HW + p];
          if (c < t.channels) v[(size_t(n) * t.channels + c) * HW + p] = x;
          else pad_nonzero += x != 0.f;
        }
    EXPECT_EQ(pad_nonzero, 0u) << t.name << ": channel padding not zero";
    return v;
  }
  // Random pool picks (0..3) into a picks tensor; returns them as maxpool2_forward's
  // argmax (index into the 2H×2W plane), NCHW.
  std::vector<int32_t> put_picks(int id) {
    const TensorSpec& t = plan_->tensors[size_t(id)];
    std::vector<uint8_t> nhwc(size_t(t.elements(kImages)), 0);
    std::vector<int32_t> argmax(size_t(kImages) * t.channels * t.H * t.W);
    std::uniform_int_distribution<int> pick(0, 3);
    for (int n = 0; n < kImages; ++n)
      for (int y = 0; y < t.H; ++y)
        for (int x = 0; x < t.W; ++x)
          for (int ch = 0; ch < t.channels; ++ch) {
            const int p = pick(rng_);
            nhwc[((size_t(n) * t.H + y) * t.W + x) * t.pitch + ch] = uint8_t(p);
            argmax[((size_t(n) * t.channels + ch) * t.H + y) * t.W + x] = (2 * y + (p >> 1)) * (2 * t.W) + 2 * x + (p & 1);
          }
    AE_CUDA_CHECK(cudaMemcpy(bufs_.get(id), nhwc.data(), nhwc.size(), cudaMemcpyHostToDevice));
    return argmax;
  }
  std::vector<uint8_t> random_images() {
    std::vector<uint8_t> img(size_t(kImages) * arch_->image_dim());
    std::uniform_int_distribution<int> u(0, 255);
    for (auto& v : img) v = uint8_t(u(rng_));
    return img;
  }
  // A ReLU output: about half zeros.
  std::vector<float> relu_output(size_t n) {
    auto v = uniform(n, -1.f, 1.f, rng_);
    for (auto& x : v) x = std::max(x, 0.f);
    return v;
  }
  void report(const char* what, double err, double tol) {
    std::printf("    %s %s: %s rel err %.2e\n", plan_archs()[size_t(GetParam().arch)].name, lp_->forward_name.c_str(), what, err);
    EXPECT_LT(err, tol) << what;
  }

  const ae::Architecture* arch_ = nullptr;
  Precision prec_ = Precision::fp32;
  DType dt_ = DType::f32;
  std::unique_ptr<Plan> plan_;
  const LayerPlan* lp_ = nullptr;
  ae::ConvLayer c_;
  std::mt19937_64 rng_;
  StepBuffers bufs_;
  PackedSet packs_;
  std::vector<float> params_;
  DeviceBuffer<float> params_dev_;
};

TEST_P(PlanLayer, ForwardMatchesCpu) {
  const int B = kImages, L = arch_->num_convs(), l = lp_->index;
  // The input: uint8 images through the im2col for the first layer, else a ReLU output.
  std::vector<float> x;
  DeviceBuffer<uint8_t> images_dev;
  std::vector<uint8_t> images;
  if (l == 0 || lp_->output) {
    images = random_images();
    images_dev = to_device(images);
  }
  if (l == 0) {
    im2col_input(images_dev.get(), nullptr, nullptr, B, c_.in, c_.H, c_.W, bufs_.get(plan_->col), plan_->col_pitch, dt_, 0);
    x.resize(images.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(images[i]) / 255.f;
  } else {
    x = relu_output(size_t(B) * c_.in * sh() * sw());
    put(lp_->forward.src, x, c_.in);
  }
  ConvArgs a = lp_->forward.bind(bufs_, packs_, params_dev_.get(), B);
  const size_t out_count = size_t(B) * c_.out * c_.H * c_.W;
  DeviceBuffer<double> loss_sum(1);
  DeviceBuffer<float> nchw;  // latent codes / reconstruction
  const float grad_scale = float(2.0 / (double(B) * arch_->image_dim()));
  if (l == plan_->latent_layer) {
    nchw = poisoned(out_count / 4);
    a.out_nchw = nchw.get();
  }
  if (lp_->output) {
    AE_CUDA_CHECK(cudaMemset(loss_sum.get(), 0, sizeof(double)));
    nchw = poisoned(out_count);
    a.out_nchw = nchw.get();
    a.images_u8 = images_dev.get();
    a.grad_scale = grad_scale;
    a.loss_sum = loss_sum.get();
  }
  conv_igemm(a, dt_, 0);
  AE_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> y(out_count);
  if (c_.upsample)
    ae::cpu::upconv3x3_forward(x.data(), w(), b(), y.data(), B, c_.in, c_.out, sh(), sw(), c_.relu);
  else
    ae::cpu::conv3x3_forward(x.data(), w(), b(), y.data(), B, c_.in, c_.out, c_.H, c_.W, c_.relu && !c_.pool);
  const double tol = tolerance(prec_);
  if (c_.pool) {
    std::vector<float> pooled(out_count / 4);
    std::vector<int32_t> argmax(out_count / 4);
    ae::cpu::maxpool2_relu_forward(y.data(), pooled.data(), argmax.data(), B, c_.out, c_.H, c_.W);
    const std::vector<float> gpu_pooled = take(lp_->forward.out);
    report("pooled output", rel_err(gpu_pooled, pooled), tol);
    if (l == plan_->latent_layer) report("latent codes (fp32 NCHW)", rel_err(to_host(nchw, pooled.size()), pooled), tol);
    // The picks: each must name an element of its 2×2 window whose exact (CPU) value is the
    // window's maximum up to rounding. Where two candidates lie within rounding of each
    // other either pick is right, so identity is not asked; a pick of an element clearly
    // below the maximum is wrong. "Clearly" is measured against the layer's RMS as well as
    // the value: an output's rounding error scales with the terms summed into it, and a
    // small output can be the difference of large ones.
    double sumsq = 0;
    for (float v : y) sumsq += double(v) * v;
    const float rms = float(std::sqrt(sumsq / double(y.size())));
    const TensorSpec& t = plan_->tensors[size_t(lp_->forward.picks_out)];
    std::vector<uint8_t> picks(size_t(t.elements(B)));
    AE_CUDA_CHECK(cudaMemcpy(picks.data(), bufs_.get(lp_->forward.picks_out), picks.size(), cudaMemcpyDeviceToHost));
    const int Ho = c_.H / 2, Wo = c_.W / 2;
    int checked = 0, wrong = 0, same = 0;
    float worst = 0.f;
    for (int n = 0; n < B; ++n)
      for (int ch = 0; ch < c_.out; ++ch)
        for (int yo = 0; yo < Ho; ++yo)
          for (int xo = 0; xo < Wo; ++xo) {
            const size_t i = ((size_t(n) * c_.out + ch) * Ho + yo) * Wo + xo;
            const float* plane = y.data() + (size_t(n) * c_.out + ch) * c_.H * c_.W;
            const float best = pooled[i];
            if (best <= 0.f) continue;  // the ReLU's zeros tie: any pick passes no gradient
            ++checked;
            const int p = picks[((size_t(n) * Ho + yo) * Wo + xo) * t.pitch + ch];
            // The pool reads the ReLU's output: where the maximum is within rounding of zero the
            // GPU may see four zeros and pick the first.
            const float picked = std::max(plane[(2 * yo + (p >> 1)) * c_.W + 2 * xo + (p & 1)], 0.f);
            const int expect = (((argmax[i] / c_.W) & 1) << 1) | ((argmax[i] % c_.W) & 1);
            same += p == expect;
            worst = std::max(worst, (best - picked) / (std::fabs(best) + rms));
            const bool bad = p > 3 || best - picked > 20 * tol * (std::fabs(best) + rms);
            if (bad && wrong == 0)  // the first one in full, to tell a wrong pick from a wrong value
              std::printf("    first wrong pick: image %d channel %d at (%d,%d): window %g %g %g %g, CPU max %g (pick %d), "
                          "GPU %g (pick %d)\n",
                          n, ch, yo, xo, plane[2 * yo * c_.W + 2 * xo], plane[2 * yo * c_.W + 2 * xo + 1],
                          plane[(2 * yo + 1) * c_.W + 2 * xo], plane[(2 * yo + 1) * c_.W + 2 * xo + 1], best, expect,
                          gpu_pooled[i], p);
            wrong += bad;
          }
    std::printf("    pool picks: %d checked, %d the CPU's own, %d wrong; largest shortfall %.2e of (|max| + rms)\n", checked,
                same, wrong, worst);
    EXPECT_GT(checked, 0);
    EXPECT_EQ(wrong, 0);
  } else if (lp_->output) {
    std::vector<float> target(out_count), dout(out_count);
    for (size_t i = 0; i < out_count; ++i) target[i] = float(images[i]) / 255.f;
    const double sum = ae::cpu::squared_error(y.data(), target.data(), int64_t(out_count), dout.data(), grad_scale);
    double got = 0;
    AE_CUDA_CHECK(cudaMemcpy(&got, loss_sum.get(), sizeof(double), cudaMemcpyDeviceToHost));
    report("reconstruction (fp32 NCHW)", rel_err(to_host(nchw, out_count), y), tol);
    report("loss sum", std::fabs(got - sum) / sum, tol);
    report("loss gradient", rel_err(take(plan_->loss_grad), dout), 2 * tol);
    ASSERT_EQ(L - 1, l);
  } else {
    report("output", rel_err(take(lp_->forward.out), y), tol);
  }
}

TEST_P(PlanLayer, InputGradientMatchesCpu) {
  if (!lp_->has_input_grad) GTEST_SKIP() << "the first layer needs no input gradient";
  const int B = kImages;
  const ConvOp& op = lp_->input_grad;
  const auto dy = normal(size_t(B) * c_.out * c_.H * c_.W, 1.f, rng_);
  put(op.src, dy, c_.out);
  const TensorSpec& aux_t = plan_->tensors[size_t(op.aux)];  // the previous layer's output
  const auto aux = relu_output(size_t(B) * c_.in * aux_t.H * aux_t.W);
  put(op.aux, aux, c_.in);
  std::vector<int32_t> argmax;
  if (op.picks_in >= 0) argmax = put_picks(op.picks_in);
  conv_igemm(op.bind(bufs_, packs_, params_dev_.get(), B), dt_, 0);
  AE_CUDA_CHECK(cudaDeviceSynchronize());

  std::vector<float> dx(size_t(B) * c_.in * sh() * sw());
  if (c_.upsample)
    ae::cpu::upconv3x3_backward(nullptr, w(), dy.data(), dx.data(), nullptr, nullptr, B, c_.in, c_.out, sh(), sw());
  else
    ae::cpu::conv3x3_backward_data(dy.data(), w(), dx.data(), B, c_.in, c_.out, c_.H, c_.W);
  std::vector<float> ref;
  if (op.args.epilogue == ConvEpilogue::unpool_mask) {
    ref.resize(dx.size() * 4);
    ae::cpu::maxpool2_relu_backward(dx.data(), argmax.data(), aux.data(), ref.data(), B, c_.in, 2 * sh(), 2 * sw());
  } else {
    ASSERT_EQ(op.args.epilogue, ConvEpilogue::mask);
    ref.resize(dx.size());
    ae::cpu::relu_backward(dx.data(), aux.data(), ref.data(), int64_t(dx.size()));
  }
  report(lp_->input_grad_name.c_str(), rel_err(take(op.out), ref), tolerance(prec_));
}

// conv_igemm's tiles (ConvTile) sum every output's reduction in the same order: each
// candidate must give the automatic tile's output bit for bit (which the tests above check
// against the CPU), and tune_conv_tile must pick one of them.
TEST_P(PlanLayer, EveryTileGivesTheSameBits) {
  const int B = kImages;
  std::vector<const ConvOp*> ops;
  if (!lp_->output) ops.push_back(&lp_->forward);
  if (lp_->has_input_grad) ops.push_back(&lp_->input_grad);
  if (lp_->index == 0) {
    const auto images = random_images();
    auto images_dev = to_device(images);
    im2col_input(images_dev.get(), nullptr, nullptr, B, c_.in, c_.H, c_.W, bufs_.get(plan_->col), plan_->col_pitch, dt_, 0);
  } else {
    put(lp_->forward.src, relu_output(size_t(B) * c_.in * sh() * sw()), c_.in);
  }
  if (lp_->has_input_grad) {
    const ConvOp& g = lp_->input_grad;
    put(g.src, normal(size_t(B) * c_.out * c_.H * c_.W, 1.f, rng_), c_.out);
    put(g.aux, relu_output(size_t(B) * c_.in * plan_->tensors[size_t(g.aux)].H * plan_->tensors[size_t(g.aux)].W), c_.in);
    if (g.picks_in >= 0) put_picks(g.picks_in);
  }
  const auto bytes_of = [&](int id) {
    std::vector<uint8_t> h(plan_->tensors[size_t(id)].bytes(B, dt_));
    AE_CUDA_CHECK(cudaMemcpy(h.data(), bufs_.get(id), h.size(), cudaMemcpyDeviceToHost));
    return h;
  };
  int compared = 0;
  for (const ConvOp* op : ops) {
    ConvArgs a = op->bind(bufs_, packs_, params_dev_.get(), B);
    const std::vector<ConvTile> tiles = conv_tile_candidates(a);
    if (tiles.empty()) continue;
    conv_igemm(a, dt_, 0);
    AE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint8_t> want = bytes_of(op->out);
    const std::vector<uint8_t> want_picks = op->picks_out >= 0 ? bytes_of(op->picks_out) : std::vector<uint8_t>();
    size_t nonzero = 0;
    for (uint8_t v : want) nonzero += v != 0;
    // (an unpooled gradient is zero at 3 of 4 positions and masked at about half of the rest)
    EXPECT_GT(nonzero, want.size() / 32) << "an all-zero output proves nothing";
    for (ConvTile tile : tiles) {
      AE_CUDA_CHECK(cudaMemset(bufs_.get(op->out), 0xff, want.size()));  // NaN: every byte must be written
      a.tile = tile;
      conv_igemm(a, dt_, 0);
      AE_CUDA_CHECK(cudaDeviceSynchronize());
      EXPECT_TRUE(bytes_of(op->out) == want) << conv_tile_name(tile) << " differs from the automatic tile";
      if (op->picks_out >= 0) EXPECT_TRUE(bytes_of(op->picks_out) == want_picks) << conv_tile_name(tile) << ": picks";
      ++compared;
    }
    a.tile = ConvTile::automatic;
    const ConvTile tuned = tune_conv_tile(a, dt_, 0);
    EXPECT_NE(std::find(tiles.begin(), tiles.end(), tuned), tiles.end()) << conv_tile_name(tuned);
  }
  std::printf("    %s: %d tile runs bit-identical\n", lp_->forward_name.c_str(), compared);
}

TEST_P(PlanLayer, WeightGradientMatchesCpu) {
  const int B = kImages, l = lp_->index;
  const WgradOp& op = lp_->wgrad;
  std::vector<float> x, dw(size_t(c_.weight_count())), db(size_t(c_.bias_count()));
  if (l == 0) {
    // the im2col of uint8 images × the pooled gradient, unpooled by the picks in the GEMM
    const auto images = random_images();
    auto images_dev = to_device(images);
    im2col_input(images_dev.get(), nullptr, nullptr, B, c_.in, c_.H, c_.W, bufs_.get(plan_->col), plan_->col_pitch, dt_, 0);
    x.resize(images.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(images[i]) / 255.f;
    const auto dp = normal(size_t(B) * c_.out * (c_.H / 2) * (c_.W / 2), 1.f, rng_);
    put(op.a_src, dp, c_.out);
    const auto argmax = put_picks(op.a_picks);
    std::vector<float> dz(size_t(B) * c_.out * c_.H * c_.W);
    ae::cpu::maxpool2_backward(dp.data(), argmax.data(), dz.data(), B, c_.out, c_.H, c_.W);
    ae::cpu::conv3x3_backward_weights(x.data(), dz.data(), dw.data(), db.data(), B, c_.in, c_.out, c_.H, c_.W);
  } else {
    const int src = lp_->forward.src, dy_id = op.bias_src;  // the layer's input and output gradient
    x = uniform(size_t(B) * c_.in * sh() * sw(), 0.f, 1.f, rng_);
    put(src, x, c_.in);
    const auto dy = normal(size_t(B) * c_.out * c_.H * c_.W, 1.f, rng_);
    put(dy_id, dy, c_.out);
    if (c_.upsample)
      ae::cpu::upconv3x3_backward(x.data(), nullptr, dy.data(), nullptr, dw.data(), db.data(), B, c_.in, c_.out, sh(),
                                  sw());
    else
      ae::cpu::conv3x3_backward_weights(x.data(), dy.data(), dw.data(), db.data(), B, c_.in, c_.out, c_.H, c_.W);
  }
  const WgradPlan wp = op.gemm_plan(B, dt_);
  DeviceBuffer<float> ws(std::max<size_t>(1, wp.workspace_floats()));
  DeviceBuffer<float> bias_work(std::max<size_t>(1, op.bias_src >= 0 ? bias_grad_work_floats(op.bias_ld) : 1));
  auto grad = poisoned(size_t(arch_->param_count()));
  op.run(bufs_, B, grad.get(), wp, ws.get(), bias_work.get(), dt_, 0);
  AE_CUDA_CHECK(cudaDeviceSynchronize());
  const auto g = to_host(grad, size_t(arch_->param_count()));
  report((lp_->wgrad_name + ": weights").c_str(), rel_err(g.data() + c_.weight_offset, dw.data(), dw.size()),
         tolerance(prec_));
  report((lp_->wgrad_name + ": bias").c_str(), rel_err(g.data() + c_.bias_offset, db.data(), db.size()),
         tolerance(prec_));
}

INSTANTIATE_TEST_SUITE_P(Architectures, PlanLayer, testing::ValuesIn(all_cases()), case_name);

// The plan's shape decisions for the seed model are today's (the speed depends on them).
TEST(Plan, SeedModelKeepsItsGemms) {
  const Plan p = make_plan(ae::Architecture::seed(), 256, DType::bf16);
  ASSERT_EQ(p.layers.size(), 5u);
  EXPECT_EQ(p.col_pitch, 32);
  EXPECT_EQ(p.layers[0].forward.args.shape, ConvShape::point1x1);
  EXPECT_EQ(p.layers[0].forward.args.Kpad, 64);
  EXPECT_EQ(p.layers[1].forward.args.Kpad, 2304);
  EXPECT_EQ(p.layers[2].forward.args.Kpad, 1152);
  EXPECT_EQ(p.layers[3].forward.args.shape, ConvShape::up2_parity);
  EXPECT_EQ(p.layers[3].forward.args.Kpad, 512);
  EXPECT_EQ(p.layers[4].forward.args.shape, ConvShape::up2_subpixel);
  EXPECT_EQ(p.layers[4].forward.args.Kpad, 2304);
  EXPECT_EQ(p.layers[4].forward.args.ldo, 8);
  EXPECT_EQ(p.layers[4].input_grad.args.Kpad, 128);
  EXPECT_EQ(p.layers[3].input_grad.args.Kpad, 4096);
  EXPECT_EQ(p.layers[2].input_grad.args.epilogue, ConvEpilogue::unpool_mask);
  EXPECT_EQ(p.layers[1].input_grad.args.epilogue, ConvEpilogue::mask);
  EXPECT_EQ(p.layers[0].wgrad.a.kind, PixelMatrix::unpooled);
  EXPECT_EQ(p.layers[0].wgrad.scatter.bias_column, 27);
  EXPECT_EQ(p.layers[1].wgrad.b.kind, PixelMatrix::patch3_flipped);  // 256 in, 128 out
  EXPECT_EQ(p.layers[2].wgrad.b.kind, PixelMatrix::patch3);
  EXPECT_EQ(p.layers[3].wgrad.parities, 4);
  EXPECT_GE(p.layers[4].wgrad.fold_dst, 0);
  EXPECT_EQ(p.layers[4].wgrad.fold_ldg, 32);
  // the two large weight gradients (encoder conv2, decoder conv2) on a branch of their own
  for (int l = 0; l < 5; ++l) EXPECT_EQ(p.layers[size_t(l)].wgrad.branch, (l == 1 || l == 3) ? 1 : 0) << l;
  EXPECT_EQ(p.packs.size(), 9u);
  std::printf("%s", plan_table(p).c_str());
}

// What every plan must hold, whatever the architecture (host only).
TEST(Plan, InvariantsOfEveryArchitecture) {
  for (const ArchCase& ac : plan_archs())
    for (int depth_case : {0, 1}) {
      const ae::Architecture arch = depth_case ? ae::Architecture(ac.arch.input_channels(), ac.arch.height(),
                                                                  ac.arch.width(), {ac.arch.encoder_channels()[0]})
                                               : ac.arch;
      const Plan p = make_plan(arch, 5, DType::bf16);
      const int k = arch.depth(), L = arch.num_convs();
      std::printf("%s", plan_table(p).c_str());
      ASSERT_EQ(int(p.layers.size()), L);
      EXPECT_EQ(int(p.packs.size()), 4 * k + 1);
      EXPECT_EQ(p.latent_layer, k - 1);
      int big = 0;
      for (const LayerPlan& lp : p.layers) {
        const int l = lp.index;
        for (const ConvOp* op : {&lp.forward, &lp.input_grad}) {
          if (op == &lp.input_grad && !lp.has_input_grad) continue;
          EXPECT_EQ(op->args.Kpad % 64, 0) << lp.conv.name;
          EXPECT_GE(op->pack, 0);
          EXPECT_EQ(p.packs[size_t(op->pack)].kpad, op->args.Kpad) << lp.conv.name;
          EXPECT_GE(op->src, 0);
          EXPECT_EQ(p.tensors[size_t(op->src)].pitch, op->args.Cs) << lp.conv.name;
        }
        EXPECT_EQ(lp.has_input_grad, l > 0);
        if (l > 0) {  // the input gradient lands where the previous layer's weight gradient reads it
          const int prev_grad = l - 1 == 0 ? p.layers[0].wgrad.a_src : p.layers[size_t(l - 1)].wgrad.bias_src;
          EXPECT_EQ(lp.input_grad.out, prev_grad) << lp.conv.name;
          EXPECT_EQ(lp.input_grad.aux, p.layers[size_t(l - 1)].forward.out) << lp.conv.name;
        }
        big += lp.wgrad.branch == 1;
      }
      EXPECT_EQ(big, 2);
      EXPECT_EQ(p.layers.back().forward.args.epilogue, ConvEpilogue::loss);
      EXPECT_EQ(p.layers.back().forward.out, p.loss_grad);
    }
}

TEST(Plan, RejectsMoreThanSevenInputChannels) {
  EXPECT_THROW(make_plan(ae::Architecture(8, 32, 32, {16}), 4, DType::f32), std::invalid_argument);
  try {
    make_plan(ae::Architecture(8, 32, 32, {16}), 4, DType::f32);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("up to 7 input channels"), std::string::npos) << e.what();
  }
}

}  // namespace
