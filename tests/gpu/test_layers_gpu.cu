// The CPU twins on the GPU (tests/gpu/support/layer_twins.cuh), which drive the production
// kernels of kernels/ae/cuda, against kernels/ae/cpu/layers.h on random inputs of real layer
// shapes: those of the seed model and of three other architectures (odd and non-square
// spatial sizes, channel counts that are not powers of two, one input channel). The fused
// epilogues exactly as the backend binds them (pool, ReLU mask, unpool + mask, loss, the
// first layer's im2col) are tests/gpu/test_plan_gpu.cu's, through make_plan.
// Tolerances (‖gpu − cpu‖ / ‖cpu‖): fp32 elementwise 1e-5, TF32 convolutions 1e-3,
// bf16 convolutions 1e-2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/ae/model.h"
#include "kernels/ae/cuda/ops.cuh"
#include "kernels/ae/cuda/plan.h"
#include "kernels/ae/cpu/layers.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/support/layer_twins.cuh"

using namespace gpu_test;
using ae::Precision;

namespace {

constexpr int kImages = 4;  // batch for the layer checks (the CPU twin must stay quick)

double conv_tolerance(Precision p) { return p == Precision::bf16 ? 1e-2 : 1e-3; }

// The architectures under test: the seed; 1×28×28 with 64,32 (7×7 latent: odd); 3×32×32
// with 96,48,24 (pitches 128, 64, 32); 1×20×12 with 100,5 (non-square, 5×3 latent, 100
// channels at pitch 128, 5 at 8).
struct ArchSpec {
  const char* name;
  int C, H, W;
  std::vector<int> channels;
};
const std::vector<ArchSpec>& arch_specs() {
  static const std::vector<ArchSpec> v = {{"seed", 3, 32, 32, {256, 128}},
                                          {"a1x28x28_64_32", 1, 28, 28, {64, 32}},
                                          {"a3x32x32_96_48_24", 3, 32, 32, {96, 48, 24}},
                                          {"a1x20x12_100_5", 1, 20, 12, {100, 5}}};
  return v;
}
ae::Architecture arch_of(int i) {
  const ArchSpec& s = arch_specs()[size_t(i)];
  return ae::Architecture(s.C, s.H, s.W, s.channels);
}

struct ConvCase {
  int arch;
  int layer;
  Precision precision;
};
std::string case_name(const testing::TestParamInfo<ConvCase>& info) {
  const ConvCase& c = info.param;
  return std::string(arch_specs()[size_t(c.arch)].name) + "_" + arch_of(c.arch).conv(c.layer).name + "_" +
         ae::precision_name(c.precision);
}

// Every (architecture, layer, precision) whose layer passes `keep`.
template <typename F>
std::vector<ConvCase> cases(F keep) {
  std::vector<ConvCase> v;
  for (int a = 0; a < int(arch_specs().size()); ++a) {
    const ae::Architecture arch = arch_of(a);
    for (int l = 0; l < arch.num_convs(); ++l)
      if (keep(arch.conv(l)))
        for (Precision p : {Precision::fp32, Precision::bf16}) v.push_back({a, l, p});
  }
  return v;
}
std::vector<ConvCase> all_layers() {
  return cases([](const ae::ConvLayer&) { return true; });
}

class ConvLayer : public testing::TestWithParam<ConvCase> {
 protected:
  void SetUp() override {
    REQUIRE_GPU();
    const ae::ConvLayer& s = arch_of(GetParam().arch).conv(GetParam().layer);
    C = s.in;
    K = s.out;
    H = s.H;
    W = s.W;
    relu = s.relu;
    output = GetParam().layer == arch_of(GetParam().arch).num_convs() - 1;
    rng.seed(1000 + GetParam().arch * 100 + GetParam().layer * 10 + int(GetParam().precision));
  }
  int C = 0, K = 0, H = 0, W = 0;
  bool relu = false, output = false;  // output: the model's last layer
  std::mt19937_64 rng;
};
TEST_P(ConvLayer, ForwardMatchesCpu) {
  const size_t nx = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W;
  auto x = uniform(nx, 0.f, 1.f, rng);  // the model's inputs are pixels/255 or ReLU outputs
  auto w = normal(size_t(K) * C * 9, std::sqrt(2.f / (C * 9)), rng);
  auto b = normal(K, 0.1f, rng);
  std::vector<float> ref(ny);
  ae::cpu::conv3x3_forward(x.data(), w.data(), b.data(), ref.data(), kImages, C, K, H, W, relu);

  auto dx = to_device(x), dw = to_device(w), db = to_device(b);
  auto dy = poisoned(ny);
  twin::conv3x3_forward(dx.get(), dw.get(), db.get(), dy.get(), kImages, C, K, H, W, relu, GetParam().precision);
  const double err = rel_err(to_host(dy, ny), ref);
  RecordProperty("rel_err", std::to_string(err));
  std::printf("    conv forward %dx%dx%d->%d %s: rel err %.2e\n", H, W, C, K, ae::precision_name(GetParam().precision), err);
  EXPECT_LT(err, conv_tolerance(GetParam().precision));
}

TEST_P(ConvLayer, BackwardDataMatchesCpu) {
  const size_t nx = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W;
  auto dyv = normal(ny, 1.f, rng);
  auto w = normal(size_t(K) * C * 9, std::sqrt(2.f / (C * 9)), rng);
  std::vector<float> ref(nx);
  ae::cpu::conv3x3_backward_data(dyv.data(), w.data(), ref.data(), kImages, C, K, H, W);

  auto ddy = to_device(dyv), dw = to_device(w);
  auto ddx = poisoned(nx);
  twin::conv3x3_backward_data(ddy.get(), dw.get(), ddx.get(), kImages, C, K, H, W, GetParam().precision);
  const double err = rel_err(to_host(ddx, nx), ref);
  std::printf("    conv backward-data %dx%dx%d->%d %s: rel err %.2e\n", H, W, C, K,
              ae::precision_name(GetParam().precision), err);
  EXPECT_LT(err, conv_tolerance(GetParam().precision));
}

TEST_P(ConvLayer, BackwardWeightsMatchesCpu) {
  const size_t nx = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W, nw = size_t(K) * C * 9;
  auto x = uniform(nx, 0.f, 1.f, rng);
  auto dyv = normal(ny, 1.f, rng);
  std::vector<float> ref_w(nw), ref_b(K);
  ae::cpu::conv3x3_backward_weights(x.data(), dyv.data(), ref_w.data(), ref_b.data(), kImages, C, K, H, W);

  auto dx = to_device(x), ddy = to_device(dyv);
  auto dw = poisoned(nw), db = poisoned(K);
  twin::conv3x3_backward_weights(dx.get(), ddy.get(), dw.get(), db.get(), kImages, C, K, H, W, false,
                                     GetParam().precision);
  const double err_w = rel_err(to_host(dw, nw), ref_w), err_b = rel_err(to_host(db, K), ref_b);
  std::printf("    conv backward-weights %dx%dx%d->%d %s: rel err w %.2e b %.2e\n", H, W, C, K,
              ae::precision_name(GetParam().precision), err_w, err_b);
  EXPECT_LT(err_w, conv_tolerance(GetParam().precision));
  EXPECT_LT(err_b, conv_tolerance(GetParam().precision));

  // accumulate adds to what is there
  twin::conv3x3_backward_weights(dx.get(), ddy.get(), dw.get(), db.get(), kImages, C, K, H, W, true,
                                     GetParam().precision);
  std::vector<float> twice(nw);
  for (size_t i = 0; i < nw; ++i) twice[i] = 2 * ref_w[i];
  EXPECT_LT(rel_err(to_host(dw, nw), twice), conv_tolerance(GetParam().precision));
}

INSTANTIATE_TEST_SUITE_P(Architectures, ConvLayer, testing::ValuesIn(all_layers()), case_name);

// The weight gradient of a convolution followed by the 2×2 max pool, from the gradient at
// the pool's output: the GPU unpools inside the GEMM (PixelMatrix::unpooled, as the backend
// does for the first encoder layer); the CPU twin routes dY through maxpool2_backward and
// then takes conv3x3_backward_weights. Every encoder layer (each has a pool).
std::vector<ConvCase> pooled_layers() {
  return cases([](const ae::ConvLayer& c) { return c.pool; });
}

class ConvThroughPool : public ConvLayer {};

TEST_P(ConvThroughPool, BackwardWeightsMatchesCpu) {
  const size_t nx = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W, np = ny / 4, nw = size_t(K) * C * 9;
  auto x = uniform(nx, 0.f, 1.f, rng);
  // the picks of a real pool (every position of the 2×2 block occurs), and its gradient
  auto pre = normal(ny, 1.f, rng);
  std::vector<float> pooled(np);
  std::vector<int32_t> argmax(np);
  ae::cpu::maxpool2_forward(pre.data(), pooled.data(), argmax.data(), kImages, K, H, W);
  auto dyp = normal(np, 1.f, rng);
  std::vector<float> dy(ny), ref_w(nw), ref_b(K);
  ae::cpu::maxpool2_backward(dyp.data(), argmax.data(), dy.data(), kImages, K, H, W);
  ae::cpu::conv3x3_backward_weights(x.data(), dy.data(), ref_w.data(), ref_b.data(), kImages, C, K, H, W);

  auto dx = to_device(x), ddyp = to_device(dyp);
  auto darg = to_device(argmax);
  auto dw = poisoned(nw), db = poisoned(K);
  twin::conv3x3_backward_weights_through_pool(dx.get(), ddyp.get(), darg.get(), dw.get(), db.get(), kImages, C, K, H,
                                                  W, GetParam().precision);
  const double err_w = rel_err(to_host(dw, nw), ref_w), err_b = rel_err(to_host(db, K), ref_b);
  std::printf("    conv backward-weights through pool %dx%dx%d->%d %s: rel err w %.2e b %.2e\n", H, W, C, K,
              ae::precision_name(GetParam().precision), err_w, err_b);
  EXPECT_LT(err_w, conv_tolerance(GetParam().precision));
  EXPECT_LT(err_b, conv_tolerance(GetParam().precision));
}

INSTANTIATE_TEST_SUITE_P(Architectures, ConvThroughPool, testing::ValuesIn(pooled_layers()), case_name);

// "Upsample ×2 then conv" as the backend runs it (four parity 2×2 convolutions forward, a
// 4×4 stride-2 convolution backward, per-parity weight gradients), against the CPU twins
// composed: upsample2_forward then conv3x3_*.
class UpsampleConvLayer : public ConvLayer {};

TEST_P(UpsampleConvLayer, ForwardMatchesCpu) {
  const int h = H / 2, w = W / 2;  // the pre-upsample size
  const size_t nx = size_t(kImages) * C * h * w, nu = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W;
  auto x = uniform(nx, 0.f, 1.f, rng);
  auto wt = normal(size_t(K) * C * 9, std::sqrt(2.f / (C * 9)), rng);
  auto b = normal(K, 0.1f, rng);
  std::vector<float> up(nu), ref(ny);
  ae::cpu::upsample2_forward(x.data(), up.data(), kImages, C, h, w);
  ae::cpu::conv3x3_forward(up.data(), wt.data(), b.data(), ref.data(), kImages, C, K, H, W, relu);
  auto dx = to_device(x), dw = to_device(wt), db = to_device(b);
  auto dy = poisoned(ny);
  twin::upsample2_conv3x3_forward(dx.get(), dw.get(), db.get(), dy.get(), kImages, C, K, h, w, relu, output,
                                  GetParam().precision);
  const double err = rel_err(to_host(dy, ny), ref);
  std::printf("    upsample+conv forward %dx%dx%d->%d %s: rel err %.2e\n", h, w, C, K,
              ae::precision_name(GetParam().precision), err);
  EXPECT_LT(err, conv_tolerance(GetParam().precision));
}

TEST_P(UpsampleConvLayer, BackwardDataMatchesCpu) {
  const int h = H / 2, w = W / 2;
  const size_t nx = size_t(kImages) * C * h * w, nu = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W;
  auto dyv = normal(ny, 1.f, rng);
  auto wt = normal(size_t(K) * C * 9, std::sqrt(2.f / (C * 9)), rng);
  std::vector<float> du(nu), ref(nx);
  ae::cpu::conv3x3_backward_data(dyv.data(), wt.data(), du.data(), kImages, C, K, H, W);
  ae::cpu::upsample2_backward(du.data(), ref.data(), kImages, C, h, w);
  auto ddy = to_device(dyv), dw = to_device(wt);
  auto ddx = poisoned(nx);
  twin::upsample2_conv3x3_backward_data(ddy.get(), dw.get(), ddx.get(), kImages, C, K, h, w, GetParam().precision);
  const double err = rel_err(to_host(ddx, nx), ref);
  std::printf("    upsample+conv backward-data %dx%dx%d->%d %s: rel err %.2e\n", h, w, C, K,
              ae::precision_name(GetParam().precision), err);
  EXPECT_LT(err, conv_tolerance(GetParam().precision));
}

TEST_P(UpsampleConvLayer, BackwardWeightsMatchesCpu) {
  const int h = H / 2, w = W / 2;
  const size_t nx = size_t(kImages) * C * h * w, nu = size_t(kImages) * C * H * W, ny = size_t(kImages) * K * H * W;
  auto x = uniform(nx, 0.f, 1.f, rng);
  auto dyv = normal(ny, 1.f, rng);
  std::vector<float> up(nu), ref_w(size_t(K) * C * 9), ref_b(K);
  ae::cpu::upsample2_forward(x.data(), up.data(), kImages, C, h, w);
  ae::cpu::conv3x3_backward_weights(up.data(), dyv.data(), ref_w.data(), ref_b.data(), kImages, C, K, H, W);
  auto dx = to_device(x), ddy = to_device(dyv);
  auto dw = poisoned(ref_w.size()), db = poisoned(K);
  twin::upsample2_conv3x3_backward_weights(dx.get(), ddy.get(), dw.get(), db.get(), kImages, C, K, h, w,
                                               GetParam().precision);
  const double err_w = rel_err(to_host(dw, ref_w.size()), ref_w), err_b = rel_err(to_host(db, K), ref_b);
  std::printf("    upsample+conv backward-weights %dx%dx%d->%d %s: rel err w %.2e b %.2e\n", h, w, C, K,
              ae::precision_name(GetParam().precision), err_w, err_b);
  EXPECT_LT(err_w, conv_tolerance(GetParam().precision));
  EXPECT_LT(err_b, conv_tolerance(GetParam().precision));
}

std::vector<ConvCase> upsampled_layers() {  // the decoder convolutions that follow an upsample
  return cases([](const ae::ConvLayer& c) { return c.upsample; });
}
INSTANTIATE_TEST_SUITE_P(Architectures, UpsampleConvLayer, testing::ValuesIn(upsampled_layers()), case_name);


// ---- bias gradient ---------------------------------------------------------------------------
using ae::cuda::DType;
using cae::cuda::DeviceBuffer;

void sync() { AE_CUDA_CHECK(cudaDeviceSynchronize()); }

// Host NCHW fp32 → device NHWC at channel pitch Cp (padding zero), in the GEMMs' type.
DeviceBuffer<char> to_nhwc(const std::vector<float>& x, int N, int C, int HW, int Cp, DType t) {
  auto d = to_device(x);
  DeviceBuffer<char> out(size_t(N) * HW * Cp * ae::cuda::dtype_bytes(t));
  twin::nchw_to_nhwc(d.get(), out.get(), N, C, HW, Cp, t, 0);
  sync();
  return out;
}
// Device NHWC at pitch Cp → host NCHW with all Cp channels.
std::vector<float> from_nhwc(const DeviceBuffer<char>& x, int N, int HW, int Cp, DType t) {
  DeviceBuffer<float> d(size_t(N) * HW * Cp);
  twin::nhwc_to_nchw(x.get(), d.get(), N, Cp, HW, Cp, t, 0);
  sync();
  return to_host(d, size_t(N) * HW * Cp);
}

// The fp32 weight gradient on the tf32 warpgroup MMA (plan_wgrad's channel_major: copies
// [channel][pixel], boxes of one image row from the tensor memory accelerator, zeros where a
// tap falls off the image) against a double-precision sum of its definition, and the
// mma.sync engine on the same plan against the same sum: operands exact in tf32, so only
// the order of the fp32 sums differs. Grid heights whose stage rows straddle two images
// (5, 7), splits that end inside a stage, the mirrored patch, tiles of 128 and 256 rows.
struct ChannelMajorCase {
  int a_cs, b_cs, images, gh;
  ae::cuda::PixelMatrix::Kind b_kind;
};
class WgradChannelMajor : public testing::TestWithParam<ChannelMajorCase> {};

TEST_P(WgradChannelMajor, MatchesItsDefinitionAndTheMmaSyncEngine) {
  REQUIRE_GPU();
  if (!ae::cuda::has_wgmma()) GTEST_SKIP() << "no warpgroup MMA on this GPU";
  using ae::cuda::PixelMatrix;
  const ChannelMajorCase c = GetParam();
  constexpr int gw = 16;
  const int64_t P = int64_t(c.images) * c.gh * gw;
  std::mt19937_64 rng(11);
  auto tf32_exact = [&](size_t n) {
    std::vector<float> v = normal(n, 1.f, rng);
    for (float& x : v) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      u &= 0xffffe000u;  // 10 mantissa bits: the tensor cores read it exactly
      std::memcpy(&x, &u, 4);
    }
    return v;
  };
  const std::vector<float> a = tf32_exact(size_t(P) * c.a_cs), b = tf32_exact(size_t(P) * c.b_cs);
  auto a_dev = to_device(a), b_dev = to_device(b);
  PixelMatrix A, B;
  A.src = a_dev.get();
  A.Hs = B.Hs = c.gh;
  A.Ws = B.Ws = gw;
  A.Cs = c.a_cs;
  A.kind = PixelMatrix::plain;
  B.src = b_dev.get();
  B.Cs = c.b_cs;
  B.kind = c.b_kind;

  // out[i][j] = Σ_p A[p][i]·B[p][j], B's column j = tap·Cs + channel, in double.
  const int M = c.a_cs, N = 9 * c.b_cs;
  std::vector<double> ref(size_t(M) * N, 0.0);
  for (int64_t p = 0; p < P; ++p) {
    const int n = int(p / (c.gh * gw)), y = int(p / gw % c.gh), x = int(p % gw);
    for (int t = 0; t < 9; ++t) {
      int ky = t / 3, kx = t % 3;
      if (c.b_kind == PixelMatrix::patch3_flipped) {
        ky = 2 - ky;
        kx = 2 - kx;
      }
      const int sy = y + ky - 1, sx = x + kx - 1;
      if (sy < 0 || sy >= c.gh || sx < 0 || sx >= gw) continue;
      const float* brow = &b[size_t((int64_t(n) * c.gh + sy) * gw + sx) * c.b_cs];
      for (int i = 0; i < M; ++i) {
        const double ai = a[size_t(p) * c.a_cs + i];
        double* out = &ref[size_t(i) * N + size_t(t) * c.b_cs];
        for (int ch = 0; ch < c.b_cs; ++ch) out[ch] += ai * brow[ch];
      }
    }
  }
  const std::vector<float> want(ref.begin(), ref.end());

  auto run = [&](const ae::cuda::WgradPlan& plan) {
    DeviceBuffer<float> ws(plan.workspace_floats());
    ae::cuda::wgrad_igemm(A, B, plan, ws.get(), DType::f32, 0);
    sync();
    const std::vector<float> parts = to_host(ws, plan.partial_floats());
    std::vector<float> sum(size_t(M) * N, 0.f);
    for (int s = 0; s < plan.splits; ++s)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) sum[size_t(i) * N + j] += parts[(size_t(s) * plan.Mp + i) * plan.Np + j];
    return sum;
  };
  const ae::cuda::WgradPlan plan = ae::cuda::plan_wgrad(A, B, c.images, c.gh, gw, 1, DType::f32);
  ASSERT_TRUE(plan.channel_major);
  EXPECT_EQ(plan.bm, c.a_cs % 256 == 0 ? 256 : 128);
  ae::cuda::WgradPlan mma_sync = plan;
  mma_sync.channel_major = false;
  mma_sync.bm = 128;
  const double err = rel_err(run(plan), want), err_mma = rel_err(run(mma_sync), want);
  std::printf("    wgrad channel-major %d x %d x %dx%dx16 (%d splits): rel err %.2e (mma.sync %.2e)\n", c.a_cs,
              N, c.images, c.gh, plan.splits, err, err_mma);
  EXPECT_LT(err, 1e-5);
  EXPECT_LT(err_mma, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WgradChannelMajor,
    testing::Values(ChannelMajorCase{256, 128, 8, 16, ae::cuda::PixelMatrix::patch3_flipped},  // the seed's conv2
                    ChannelMajorCase{128, 128, 13, 7, ae::cuda::PixelMatrix::patch3},
                    ChannelMajorCase{256, 256, 3, 5, ae::cuda::PixelMatrix::patch3},
                    ChannelMajorCase{128, 256, 9, 16, ae::cuda::PixelMatrix::patch3_flipped}),
    [](const testing::TestParamInfo<ChannelMajorCase>& i) {
      const ChannelMajorCase& c = i.param;
      return "a" + std::to_string(c.a_cs) + "_b" + std::to_string(c.b_cs) + "_" + std::to_string(c.images) + "x" +
             std::to_string(c.gh) + (c.b_kind == ae::cuda::PixelMatrix::patch3_flipped ? "_flipped" : "");
    });

// bias_grad at pitches wider than a block and than a block's 8-column groups (4,096), with
// fewer columns than the pitch, over one row, a few and enough rows for every block to take
// several per thread; the same sums bit for bit when run again (a fixed order).
TEST(GpuLayers, BiasGradAnyPitch) {
  REQUIRE_GPU();
  std::mt19937_64 rng(9);
  const std::vector<std::pair<int, int>> shapes = {{8, 3001},   {128, 3001}, {512, 3001}, {1024, 3001},
                                                   {4096, 777}, {8, 1},      {256, 1},    {128, 200003}};
  for (const auto& [ld, rows] : shapes)
    for (DType t : {DType::f32, DType::bf16}) {
      const int ncols = ld - 3;
      auto src = normal(size_t(rows) * ld, 1.f, rng);
      auto dsrc = to_nhwc(src, 1, ld, rows, ld, t);  // [rows][ld] as one image's NHWC
      const auto rounded = from_nhwc(dsrc, 1, rows, ld, t);  // NCHW: [ld][rows]
      std::vector<float> ref(size_t(ncols), 0.f);
      for (int c = 0; c < ncols; ++c) {
        double sum = 0;
        for (int r = 0; r < rows; ++r) sum += rounded[size_t(c) * rows + r];
        ref[size_t(c)] = float(sum);
      }
      DeviceBuffer<float> work(ae::cuda::bias_grad_work_floats(ld));
      auto out = poisoned(size_t(ncols)), again = poisoned(size_t(ncols));
      ae::cuda::bias_grad(dsrc.get(), rows, ld, ncols, work.get(), out.get(), t, 0);
      ae::cuda::bias_grad(dsrc.get(), rows, ld, ncols, work.get(), again.get(), t, 0);
      sync();
      const auto got = to_host(out, size_t(ncols));
      EXPECT_LT(rel_err(got, ref), 1e-5) << "ld " << ld << ", rows " << rows;
      EXPECT_EQ(got, to_host(again, size_t(ncols))) << "ld " << ld << ", rows " << rows;
    }
}

// ---- elementwise layers, fp32 exact up to rounding ----------------------------------------
// ---- weight packing ------------------------------------------------------------------------
// Packed element (row, col) as ops.cuh documents it, summed in the same order.
float packed_reference(ae::cuda::PackKind kind, const std::vector<float>& w, int K, int C, int pitch, int row, int col) {
  using ae::cuda::PackKind;
  auto W = [&](int k, int c, int ky, int kx) { return w[(size_t(k) * C + c) * 9 + ky * 3 + kx]; };
  const int t = col / pitch, c = col % pitch;
  switch (kind) {
    case PackKind::fwd3: return t < 9 && c < C ? W(row, c, t / 3, t % 3) : 0.f;
    case PackKind::fwd_im2col: return col < 9 * C ? W(row, col % C, col / C / 3, col / C % 3) : 0.f;
    case PackKind::bwd3: return t < 9 && c < K ? W(c, row, (8 - t) / 3, (8 - t) % 3) : 0.f;
    case PackKind::fwd_up2_parity: {
      if (t >= 4 || c >= C) return 0.f;
      const int par = row / K, k = row % K, dy = par >> 1, dx = par & 1, a = t >> 1, b = t & 1;
      // Output row 2y+dy, tap ky reads source row y + ((dy+ky−1)>>1) = y + dy + a − 1.
      float s = 0.f;
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          const int ay = ((dy + ky - 1) >> 1) + 1 - dy, ax = ((dx + kx - 1) >> 1) + 1 - dx;
          if (ay == a && ax == b) s += W(k, c, ky, kx);
        }
      return s;
    }
    case PackKind::fwd_up2_subpixel: {
      if (t >= 9 || c >= C) return 0.f;
      const int par = row / K, k = row % K, dy = par >> 1, dx = par & 1;
      float s = 0.f;
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx)
          if (((dy + ky + 1) >> 1) == t / 3 && ((dx + kx + 1) >> 1) == t % 3) s += W(k, c, ky, kx);
      return s;
    }
    case PackKind::bwd_down2_4x4: {
      if (t >= 16 || c >= K) return 0.f;
      float s = 0.f;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          const int ky = dy + 2 - (t >> 2), kx = dx + 2 - (t & 3);
          if (ky >= 0 && ky < 3 && kx >= 0 && kx < 3) s += W(c, row, ky, kx);
        }
      return s;
    }
  }
  return 0.f;
}

// Every packed layout against the reference, padding included (zero, never written), at
// sizes within one block and across several (K·C > 256), in fp32 and bf16, bit for bit.
TEST(GpuLayers, PackWeightsMatchesReference) {
  REQUIRE_GPU();
  using ae::cuda::PackKind;
  std::mt19937_64 rng(5);
  struct Case {
    PackKind kind;
    int K, C, taps;
  };
  const std::vector<Case> cases = {{PackKind::fwd3, 5, 6, 9},           {PackKind::fwd3, 40, 33, 9},
                                   {PackKind::fwd_im2col, 7, 3, 1},     {PackKind::bwd3, 5, 6, 9},
                                   {PackKind::bwd3, 33, 40, 9},         {PackKind::fwd_up2_parity, 5, 6, 4},
                                   {PackKind::fwd_up2_parity, 24, 40, 4}, {PackKind::fwd_up2_subpixel, 3, 20, 9},
                                   {PackKind::bwd_down2_4x4, 6, 5, 16}, {PackKind::bwd_down2_4x4, 40, 24, 16}};
  for (const Case& cs : cases)
    for (DType t : {DType::f32, DType::bf16}) {
      const bool transposed = cs.kind == PackKind::bwd3 || cs.kind == PackKind::bwd_down2_4x4;
      const int in = transposed ? cs.K : cs.C;  // the channels a column tap holds
      int pitch = 8;
      while (pitch < in) pitch *= 2;
      const int kpad = cs.kind == PackKind::fwd_im2col ? 64 : ae::cuda::packed_kpad(cs.taps, pitch);
      ae::cuda::PackedWeights p{cs.kind, 0, cs.K, cs.C, nullptr, kpad, pitch};
      const auto w = normal(size_t(cs.K) * cs.C * 9, 1.f, rng);
      auto dw = to_device(w);
      const size_t n = size_t(p.count()), es = ae::cuda::dtype_bytes(t);
      DeviceBuffer<char> dst(n * es);
      AE_CUDA_CHECK(cudaMemset(dst.get(), 0, n * es));
      p.dst = dst.get();
      ae::cuda::PackList list;
      list.add(p);
      ae::cuda::pack_weights(dw.get(), list, t, 0);
      sync();
      std::vector<char> raw(n * es);
      AE_CUDA_CHECK(cudaMemcpy(raw.data(), dst.get(), n * es, cudaMemcpyDeviceToHost));
      int bad = 0;
      for (size_t i = 0; i < n && bad < 5; ++i) {
        const int row = int(i / size_t(kpad)), col = int(i % size_t(kpad));
        const float ref = packed_reference(cs.kind, w, cs.K, cs.C, cs.kind == PackKind::fwd_im2col ? 1 : pitch, row, col);
        float got;
        if (t == DType::f32) {
          std::memcpy(&got, raw.data() + i * 4, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, raw.data() + i * 2, 2);
          const uint32_t bits = uint32_t(h) << 16;
          std::memcpy(&got, &bits, 4);
        }
        // The stored operand: fp32 rounded to tf32 (to nearest, ties away), bf16 to nearest even.
        uint32_t bits;
        std::memcpy(&bits, &ref, 4);
        bits = t == DType::f32 ? (bits + 0x1000u) & 0xffffe000u : (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
        float want;
        std::memcpy(&want, &bits, 4);
        if (got != want) {
          ++bad;
          ADD_FAILURE() << "kind " << int(cs.kind) << ", K " << cs.K << ", C " << cs.C << ", " << (t == DType::f32 ? "fp32" : "bf16")
                        << ": row " << row << ", column " << col << ": " << got << " against " << want;
        }
      }
    }
}

TEST(GpuLayers, ReluBackwardMatchesCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(1);
  const size_t n = size_t(kImages) * 256 * 32 * 32;
  auto y = normal(n, 1.f, rng), dy = normal(n, 1.f, rng);
  for (auto& v : y) v = std::max(v, 0.f);  // ReLU outputs, many exact zeros
  std::vector<float> ref(n);
  ae::cpu::relu_backward(dy.data(), y.data(), ref.data(), int64_t(n));
  auto dyd = to_device(dy), yd = to_device(y);
  auto dxd = poisoned(n);
  twin::relu_backward(dyd.get(), yd.get(), dxd.get(), int64_t(n));
  EXPECT_EQ(rel_err(to_host(dxd, n), ref), 0.0);
}

class PoolShape : public testing::TestWithParam<std::pair<int, int>> {};  // (C, H)

TEST_P(PoolShape, MaxPoolForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  const auto [C, H] = GetParam();
  std::mt19937_64 rng(C + H);
  const size_t nx = size_t(kImages) * C * H * H, ny = nx / 4;
  auto x = normal(nx, 1.f, rng);
  for (size_t i = 0; i < nx; i += 7) x[i] = 0.f;  // ties at zero, as after a ReLU
  std::vector<float> ref_y(ny), ref_dx(nx);
  std::vector<int32_t> ref_arg(ny);
  ae::cpu::maxpool2_forward(x.data(), ref_y.data(), ref_arg.data(), kImages, C, H, H);
  auto xd = to_device(x);
  auto yd = poisoned(ny);
  cae::cuda::DeviceBuffer<int32_t> argd(ny);
  twin::maxpool2_forward(xd.get(), yd.get(), argd.get(), kImages, C, H, H);
  EXPECT_EQ(rel_err(to_host(yd, ny), ref_y), 0.0);
  EXPECT_EQ(to_host(argd, ny), ref_arg);

  auto dy = normal(ny, 1.f, rng);
  ae::cpu::maxpool2_backward(dy.data(), ref_arg.data(), ref_dx.data(), kImages, C, H, H);
  auto dyd = to_device(dy);
  auto dxd = poisoned(nx);
  twin::maxpool2_backward(dyd.get(), argd.get(), dxd.get(), kImages, C, H, H);
  EXPECT_EQ(rel_err(to_host(dxd, nx), ref_dx), 0.0);
}
INSTANTIATE_TEST_SUITE_P(RealShapes, PoolShape,
                         testing::Values(std::make_pair(256, 32), std::make_pair(128, 16), std::make_pair(32, 14),
                                         std::make_pair(100, 20)));

class UpsampleShape : public testing::TestWithParam<std::pair<int, int>> {};  // (C, H) of the input

TEST_P(UpsampleShape, ForwardBackwardMatchCpu) {
  REQUIRE_GPU();
  const auto [C, H] = GetParam();
  std::mt19937_64 rng(C * 3 + H);
  const size_t nx = size_t(kImages) * C * H * H, ny = nx * 4;
  auto x = normal(nx, 1.f, rng);
  std::vector<float> ref_y(ny), ref_dx(nx);
  ae::cpu::upsample2_forward(x.data(), ref_y.data(), kImages, C, H, H);
  auto xd = to_device(x);
  auto yd = poisoned(ny);
  twin::upsample2_forward(xd.get(), yd.get(), kImages, C, H, H);
  EXPECT_EQ(rel_err(to_host(yd, ny), ref_y), 0.0);

  auto dy = normal(ny, 1.f, rng);
  ae::cpu::upsample2_backward(dy.data(), ref_dx.data(), kImages, C, H, H);
  auto dyd = to_device(dy);
  auto dxd = poisoned(nx);
  twin::upsample2_backward(dyd.get(), dxd.get(), kImages, C, H, H);
  EXPECT_LT(rel_err(to_host(dxd, nx), ref_dx), 1e-6);
}
INSTANTIATE_TEST_SUITE_P(RealShapes, UpsampleShape,
                         testing::Values(std::make_pair(128, 8), std::make_pair(256, 16), std::make_pair(32, 7),
                                         std::make_pair(5, 5)));

TEST(GpuLayers, MseLossMatchesCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(5);
  const size_t n = size_t(kImages) * 3072;
  auto pred = uniform(n, 0.f, 1.f, rng), target = uniform(n, 0.f, 1.f, rng);
  std::vector<float> ref_d(n);
  const double ref = ae::cpu::mse_loss(pred.data(), target.data(), int64_t(n), ref_d.data());
  auto pd = to_device(pred), td = to_device(target);
  auto dd = poisoned(n);
  const double got = twin::mse_loss(pd.get(), td.get(), int64_t(n), dd.get());
  EXPECT_NEAR(got, ref, 1e-9 * ref);
  EXPECT_LT(rel_err(to_host(dd, n), ref_d), 1e-6);
}

TEST(GpuLayers, AdamStepsMatchCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(6);
  const size_t n = size_t(ae::Architecture::seed().param_count());
  auto p = normal(n, 0.05f, rng);
  std::vector<float> m(n, 0.f), v(n, 0.f);
  auto pd = to_device(p), md = to_device(m), vd = to_device(v);
  for (int step = 1; step <= 3; ++step) {
    auto g = normal(n, 1e-2f, rng);
    ae::cpu::adam_step(p.data(), g.data(), m.data(), v.data(), int64_t(n), step, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f);
    auto gd = to_device(g);
    twin::adam_step(pd.get(), gd.get(), md.get(), vd.get(), int64_t(n), step, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f);
  }
  EXPECT_LT(rel_err(to_host(pd, n), p), 1e-6);
  EXPECT_LT(rel_err(to_host(md, n), m), 1e-6);
  EXPECT_LT(rel_err(to_host(vd, n), v), 1e-6);
}

TEST(GpuLayers, SgdMomentumStepsMatchCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(7);
  const size_t n = size_t(ae::Architecture::seed().param_count());
  auto p = normal(n, 0.05f, rng);
  std::vector<float> buf(n, 0.f);
  auto pd = to_device(p), bd = to_device(buf);
  for (int step = 1; step <= 3; ++step) {
    auto g = normal(n, 1e-2f, rng);
    ae::cpu::sgd_step(p.data(), g.data(), buf.data(), int64_t(n), 0.05f, 0.9f, 1e-4f);
    auto gd = to_device(g);
    twin::sgd_step(pd.get(), gd.get(), bd.get(), int64_t(n), 0.05f, 0.9f, 1e-4f);
  }
  EXPECT_LT(rel_err(to_host(pd, n), p), 1e-6);
  EXPECT_LT(rel_err(to_host(bd, n), buf), 1e-6);
}

TEST(GpuLayers, GlobalNormMatchesCpu) {
  REQUIRE_GPU();
  std::mt19937_64 rng(8);
  auto g = normal(size_t(ae::Architecture::seed().param_count()), 1e-2f, rng);
  auto gd = to_device(g);
  const double ref = ae::cpu::global_norm(g.data(), int64_t(g.size()));
  EXPECT_NEAR(twin::global_norm(gd.get(), int64_t(g.size())), ref, 1e-9 * ref);
}

// A device allocation that cannot be met is cae::OutOfDeviceMemory, which the tools print
// with a hint (a smaller --batch-size), and the device stays usable after it.
TEST(GpuMemory, FailedAllocationIsOutOfDeviceMemoryAndNotSticky) {
  REQUIRE_GPU();
  cae::cuda::DeviceBuffer<char> huge;
  try {
    huge.resize(size_t(1) << 50);  // 1 PiB
    FAIL() << "a 1 PiB device allocation succeeded";
  } catch (const cae::OutOfDeviceMemory& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("GPU out of memory: 1048576.00 GiB more were needed with ", 0), 0u) << what;
    EXPECT_NE(what.find(" GiB free"), std::string::npos) << what;
  }
  EXPECT_EQ(huge.get(), nullptr);
  std::vector<float> h(4096, 1.5f);
  auto d = to_device(h);
  EXPECT_EQ(to_host(d, h.size()), h);
}

}  // namespace
