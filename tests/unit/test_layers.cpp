// The CPU layers (kernels/ae/cpu/layers.h, conv2d.h, upconv.h, run over a batch by
// tests/support/cpu_layers.h): forward against the direct-loop reference
// (tests/support/layer_reference.h), every backward against central finite differences of
// the reference forward computed in double precision, optimizer steps against values
// worked out by hand.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/ae/cpu/conv2d.h"
#include "kernels/ae/cpu/layers.h"
#include "tests/support/cpu_layers.h"
#include "tests/support/layer_reference.h"

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;

// Uniform in [-1,1] but at least 0.05 away from 0, so ReLU kinks and max-pool ties stay
// far from the finite-difference step. Values are floats, so double and float agree.
Vec random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float& x : v) {
    do x = u(rng);
    while (std::fabs(x) < 0.05f);
  }
  return v;
}
DVec to_double(const Vec& v) { return DVec(v.begin(), v.end()); }

// Central difference of a scalar function of a vector, at every element.
DVec finite_diff(DVec at, const std::function<double(const DVec&)>& f, double h = 1e-6) {
  DVec grad(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    const double keep = at[i];
    at[i] = keep + h;
    const double up = f(at);
    at[i] = keep - h;
    const double down = f(at);
    at[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

double dot(const DVec& a, const DVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// max |a-b| / max(max|b|, tiny): one relative error for a whole tensor.
template <typename A, typename B>
double rel_err(const A& a, const B& b) {
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

struct ConvCase {
  int N, C, K, H, W;
  bool relu;
};
// Both GEMM mappings: input side (C <= K) and output side (C > K), odd sizes, one pixel.
const ConvCase kConvCases[] = {
    {2, 3, 5, 6, 6, true}, {2, 6, 2, 5, 7, false}, {3, 4, 4, 4, 4, true}, {1, 5, 3, 1, 1, false},
    {2, 7, 1, 3, 5, true}, {1, 1, 7, 6, 3, false},
};

TEST(Conv3x3, ForwardMatchesReference) {
  for (const ConvCase& t : kConvCases) {
    Vec x = random_vec(size_t(t.N) * t.C * t.H * t.W, 1), w = random_vec(size_t(t.K) * t.C * 9, 2),
        b = random_vec(t.K, 3);
    Vec y(size_t(t.N) * t.K * t.H * t.W);
    DVec y_ref(y.size());
    ae::cpu::conv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b);
    ae::ref::conv3x3_forward(xd.data(), wd.data(), bd.data(), y_ref.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
    EXPECT_LT(rel_err(y, y_ref), 1e-6) << "C=" << t.C << " K=" << t.K << " H=" << t.H << " W=" << t.W;
  }
}

TEST(Conv3x3, ForwardAtModelShapes) {
  // The five layers of the model at their real sizes, one image each.
  const ConvCase shapes[] = {{1, 3, 256, 32, 32, true}, {1, 256, 128, 16, 16, true}, {1, 128, 128, 8, 8, true},
                             {1, 128, 256, 16, 16, true}, {1, 256, 3, 32, 32, false}};
  for (const ConvCase& t : shapes) {
    Vec x = random_vec(size_t(t.C) * t.H * t.W, 4), w = random_vec(size_t(t.K) * t.C * 9, 5, -0.1f, 0.1f),
        b = random_vec(t.K, 6);
    Vec y(size_t(t.K) * t.H * t.W);
    DVec y_ref(y.size());
    ae::cpu::conv3x3_forward(x.data(), w.data(), b.data(), y.data(), 1, t.C, t.K, t.H, t.W, t.relu);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b);
    ae::ref::conv3x3_forward(xd.data(), wd.data(), bd.data(), y_ref.data(), 1, t.C, t.K, t.H, t.W, t.relu);
    EXPECT_LT(rel_err(y, y_ref), 1e-5) << "C=" << t.C << " K=" << t.K;
  }
}

// L = Σ r·conv(x) with a random r: dL/dx, dL/dw, dL/db are the backward pass applied to r.
TEST(Conv3x3, BackwardMatchesFiniteDifferences) {
  for (const ConvCase& t : kConvCases) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * t.H * t.W, nw = size_t(t.K) * t.C * 9;
    Vec x = random_vec(nx, 11), w = random_vec(nw, 12), b = random_vec(t.K, 13), r = random_vec(ny, 14);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b), rd = to_double(r);
    auto loss = [&](const DVec& xx, const DVec& ww, const DVec& bb) {
      DVec y(ny);
      ae::ref::conv3x3_forward(xx.data(), ww.data(), bb.data(), y.data(), t.N, t.C, t.K, t.H, t.W, false);
      return dot(y, rd);
    };
    DVec gx = finite_diff(xd, [&](const DVec& v) { return loss(v, wd, bd); });
    DVec gw = finite_diff(wd, [&](const DVec& v) { return loss(xd, v, bd); });
    DVec gb = finite_diff(bd, [&](const DVec& v) { return loss(xd, wd, v); });

    Vec dx(nx), dw(nw), db(t.K);
    ae::cpu::conv3x3_backward(x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H,
                              t.W);
    EXPECT_LT(rel_err(dx, gx), 1e-5) << "dx, C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(dw, gw), 1e-5) << "dw, C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(db, gb), 1e-5) << "db, C=" << t.C << " K=" << t.K;

    // The separate entry points give the same numbers, and accumulate adds.
    Vec dx2(nx), dw2(nw, 1.0f), db2(t.K, 1.0f);
    ae::cpu::conv3x3_backward_data(r.data(), w.data(), dx2.data(), t.N, t.C, t.K, t.H, t.W);
    ae::cpu::conv3x3_backward_weights(x.data(), r.data(), dw2.data(), db2.data(), t.N, t.C, t.K, t.H, t.W, true);
    EXPECT_EQ(dx, dx2);
    for (size_t i = 0; i < nw; ++i) EXPECT_FLOAT_EQ(dw2[i], dw[i] + 1.0f);
    for (int k = 0; k < t.K; ++k) EXPECT_FLOAT_EQ(db2[k], db[k] + 1.0f);

    // The double reference backward agrees with the finite differences too (so it can
    // serve as the oracle for GPU tests).
    DVec rdx(nx), rdw(nw), rdb(t.K);
    ae::ref::conv3x3_backward_data(rd.data(), wd.data(), rdx.data(), t.N, t.C, t.K, t.H, t.W);
    ae::ref::conv3x3_backward_weights(xd.data(), rd.data(), rdw.data(), rdb.data(), t.N, t.C, t.K, t.H, t.W);
    EXPECT_LT(rel_err(rdx, gx), 1e-7);
    EXPECT_LT(rel_err(rdw, gw), 1e-7);
  }
}

TEST(Conv3x3, BackwardAtModelShapesMatchesReference) {
  const ConvCase shapes[] = {{2, 3, 256, 32, 32, true}, {2, 256, 128, 16, 16, true}, {2, 128, 128, 8, 8, true},
                             {2, 128, 256, 16, 16, true}, {2, 256, 3, 32, 32, false}};
  for (const ConvCase& t : shapes) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * t.H * t.W, nw = size_t(t.K) * t.C * 9;
    Vec x = random_vec(nx, 21), w = random_vec(nw, 22, -0.1f, 0.1f), dy = random_vec(ny, 23);
    Vec dx(nx), dw(nw), db(t.K);
    ae::cpu::conv3x3_backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H,
                              t.W);
    DVec xd = to_double(x), wd = to_double(w), dyd = to_double(dy), rdx(nx), rdw(nw), rdb(t.K);
    ae::ref::conv3x3_backward_data(dyd.data(), wd.data(), rdx.data(), t.N, t.C, t.K, t.H, t.W);
    ae::ref::conv3x3_backward_weights(xd.data(), dyd.data(), rdw.data(), rdb.data(), t.N, t.C, t.K, t.H, t.W);
    EXPECT_LT(rel_err(dx, rdx), 1e-5) << "C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(dw, rdw), 1e-5) << "C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(db, rdb), 1e-5) << "C=" << t.C << " K=" << t.K;
  }
}

TEST(Conv3x3, SameThreadCountIsBitIdentical) {
  const int N = 7, C = 6, K = 4, H = 8, W = 8;
  Vec x = random_vec(size_t(N) * C * H * W, 31), w = random_vec(size_t(K) * C * 9, 32),
      dy = random_vec(size_t(N) * K * H * W, 33);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Vec dw(size_t(K) * C * 9), db(K);
    ae::cpu::conv3x3_backward_weights(x.data(), dy.data(), dw.data(), db.data(), N, C, K, H, W);
    return dw;
  };
  const int saved = omp_get_max_threads();
  Vec one = run(1), two_a = run(2), two_b = run(2);
  omp_set_num_threads(saved);
  EXPECT_EQ(two_a, two_b);
  EXPECT_LT(rel_err(two_a, one), 1e-5);
}

TEST(Conv3x3, Im2colAndShiftSumAreAdjoint) {
  // <im2col(x), z> == <x, col2im(z)>: the backward rearrangement is the transpose of the
  // forward one, for both offset signs.
  const int C = 3, H = 5, W = 4;
  Vec x = random_vec(size_t(C) * H * W, 41), z = random_vec(size_t(C) * 9 * H * W, 42);
  for (int sign : {+1, -1}) {
    Vec col(z.size()), back(x.size());
    ae::cpu::im2col3x3(x.data(), C, H, W, sign, col.data());
    ae::cpu::shift_sum3x3(z.data(), C, H, W, -sign, nullptr, false, back.data());
    EXPECT_NEAR(dot(to_double(col), to_double(z)), dot(to_double(x), to_double(back)), 1e-4);
  }
}

// upconv3x3 = upsample2 then conv3x3, computed as four 2×2 phase convolutions.
const ConvCase kUpConvCases[] = {
    {2, 3, 5, 3, 3, true}, {2, 6, 2, 4, 3, false}, {1, 4, 4, 2, 5, true}, {1, 5, 3, 1, 1, false}, {2, 7, 1, 3, 2, true},
};

DVec upsample_then_conv(const DVec& x, const DVec& w, const DVec& b, const ConvCase& t, bool relu) {
  DVec up(size_t(t.N) * t.C * 4 * t.H * t.W), y(size_t(t.N) * t.K * 4 * t.H * t.W);
  ae::ref::upsample2_forward(x.data(), up.data(), t.N, t.C, t.H, t.W);
  ae::ref::conv3x3_forward(up.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, 2 * t.H, 2 * t.W, relu);
  return y;
}

TEST(UpConv3x3, ForwardMatchesUpsampleThenConv) {
  for (const ConvCase& t : kUpConvCases) {
    Vec x = random_vec(size_t(t.N) * t.C * t.H * t.W, 91), w = random_vec(size_t(t.K) * t.C * 9, 92),
        b = random_vec(t.K, 93);
    Vec y(size_t(t.N) * t.K * 4 * t.H * t.W);
    ae::cpu::upconv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
    DVec y_ref = upsample_then_conv(to_double(x), to_double(w), to_double(b), t, t.relu);
    EXPECT_LT(rel_err(y, y_ref), 1e-6) << "C=" << t.C << " K=" << t.K << " H=" << t.H << " W=" << t.W;
  }
}

TEST(UpConv3x3, BackwardMatchesFiniteDifferences) {
  for (const ConvCase& t : kUpConvCases) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * 4 * t.H * t.W,
                 nw = size_t(t.K) * t.C * 9;
    Vec x = random_vec(nx, 94), w = random_vec(nw, 95), b = random_vec(t.K, 96), r = random_vec(ny, 97);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b), rd = to_double(r);
    auto loss = [&](const DVec& xx, const DVec& ww, const DVec& bb) { return dot(upsample_then_conv(xx, ww, bb, t, false), rd); };
    DVec gx = finite_diff(xd, [&](const DVec& v) { return loss(v, wd, bd); });
    DVec gw = finite_diff(wd, [&](const DVec& v) { return loss(xd, v, bd); });
    DVec gb = finite_diff(bd, [&](const DVec& v) { return loss(xd, wd, v); });
    Vec dx(nx), dw(nw), db(t.K);
    ae::cpu::upconv3x3_backward(x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H, t.W);
    EXPECT_LT(rel_err(dx, gx), 1e-5) << "dx, C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(dw, gw), 1e-5) << "dw, C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(db, gb), 1e-5) << "db, C=" << t.C << " K=" << t.K;
    // Weights only, accumulated onto existing values; input gradient only.
    Vec dw2(nw, 1.0f), db2(t.K, 1.0f), dx2(nx);
    ae::cpu::upconv3x3_backward(x.data(), nullptr, r.data(), nullptr, dw2.data(), db2.data(), t.N, t.C, t.K, t.H, t.W,
                                true);
    ae::cpu::upconv3x3_backward(nullptr, w.data(), r.data(), dx2.data(), nullptr, nullptr, t.N, t.C, t.K, t.H, t.W);
    for (size_t i = 0; i < nw; ++i) EXPECT_FLOAT_EQ(dw2[i], dw[i] + 1.0f);
    EXPECT_EQ(dx2, dx);
  }
}

TEST(UpConv3x3, AtModelShapesMatchesUpsampleThenConv) {
  // decoder conv2 (input side) and conv3 (output side), forward and backward.
  const ConvCase shapes[] = {{2, 128, 256, 8, 8, true}, {2, 256, 3, 16, 16, false}};
  for (const ConvCase& t : shapes) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * 4 * t.H * t.W,
                 nw = size_t(t.K) * t.C * 9, nu = nx * 4;
    Vec x = random_vec(nx, 98), w = random_vec(nw, 99, -0.1f, 0.1f), b = random_vec(t.K, 100), dy = random_vec(ny, 101);
    Vec y(ny), dx(nx), dw(nw), db(t.K);
    ae::cpu::upconv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
    ae::cpu::upconv3x3_backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H, t.W);
    DVec xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
    DVec y_ref = upsample_then_conv(xd, wd, to_double(b), t, t.relu);
    DVec up(nu), dup(nu), rdx(nx), rdw(nw), rdb(t.K);
    ae::ref::upsample2_forward(xd.data(), up.data(), t.N, t.C, t.H, t.W);
    ae::ref::conv3x3_backward_data(dyd.data(), wd.data(), dup.data(), t.N, t.C, t.K, 2 * t.H, 2 * t.W);
    ae::ref::upsample2_backward(dup.data(), rdx.data(), t.N, t.C, t.H, t.W);
    ae::ref::conv3x3_backward_weights(up.data(), dyd.data(), rdw.data(), rdb.data(), t.N, t.C, t.K, 2 * t.H, 2 * t.W);
    EXPECT_LT(rel_err(y, y_ref), 1e-5) << "C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(dx, rdx), 1e-5) << "C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(dw, rdw), 1e-5) << "C=" << t.C << " K=" << t.K;
    EXPECT_LT(rel_err(db, rdb), 1e-5) << "C=" << t.C << " K=" << t.K;
  }
}

TEST(Relu, BackwardMatchesFiniteDifferences) {
  const size_t n = 200;
  Vec x = random_vec(n, 51), r = random_vec(n, 52);
  DVec rd = to_double(r);
  auto relu_dot = [&](const DVec& v) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += std::max(v[i], 0.0) * rd[i];
    return s;
  };
  DVec g = finite_diff(to_double(x), relu_dot);
  Vec y(n), dx(n);
  for (size_t i = 0; i < n; ++i) y[i] = std::max(x[i], 0.0f);
  ae::cpu::relu_backward(r.data(), y.data(), dx.data(), n);
  EXPECT_LT(rel_err(dx, g), 1e-7);
  int zeros = 0;
  for (float v : dx) zeros += v == 0.0f;
  EXPECT_GT(zeros, 50);  // the input really had negative values
  EXPECT_LT(zeros, 150);
}

TEST(MaxPool2, ForwardAndBackward) {
  const int N = 2, C = 3, H = 6, W = 8;
  const size_t nx = size_t(N) * C * H * W, ny = nx / 4;
  Vec x = random_vec(nx, 61), r = random_vec(ny, 62);
  Vec y(ny), dx(nx);
  std::vector<int32_t> arg(ny), arg_ref(ny);
  ae::cpu::maxpool2_forward(x.data(), y.data(), arg.data(), N, C, H, W);
  DVec xd = to_double(x), y_ref(ny), rd = to_double(r);
  ae::ref::maxpool2_forward(xd.data(), y_ref.data(), arg_ref.data(), N, C, H, W);
  EXPECT_EQ(arg, arg_ref);
  EXPECT_LT(rel_err(y, y_ref), 1e-12);
  DVec g = finite_diff(xd, [&](const DVec& v) {
    DVec yy(ny);
    std::vector<int32_t> a(ny);
    ae::ref::maxpool2_forward(v.data(), yy.data(), a.data(), N, C, H, W);
    return dot(yy, rd);
  });
  ae::cpu::maxpool2_backward(r.data(), arg.data(), dx.data(), N, C, H, W);
  EXPECT_LT(rel_err(dx, g), 1e-7);
}

TEST(MaxPool2, TiesAndNanFollowPyTorch) {
  // One 2×2 window per case: ties go to the first element, a NaN wins — in the training's
  // fused ReLU+pool and in the plain pool the GPU tests compare against.
  const float nan = std::nanf("");
  struct Case {
    float v[4];
    int32_t expect;
    float max;
  } cases[] = {{{1, 1, 1, 1}, 0, 1}, {{0, 2, 2, 1}, 1, 2}, {{1, nan, 3, 0}, 1, nan}, {{-1, -3, -2, -1}, 0, -1}};
  for (const Case& c : cases) {
    float y, y_relu;
    int32_t a, a_relu;
    ae::cpu::maxpool2_forward(c.v, &y, &a, 1, 1, 2, 2);
    ae::cpu::maxpool2_relu_forward(c.v, &y_relu, &a_relu, 1, 1, 2, 2);
    EXPECT_EQ(a, c.expect);
    EXPECT_EQ(a_relu, c.expect);
    if (std::isnan(c.max)) {
      EXPECT_TRUE(std::isnan(y) && std::isnan(y_relu));  // ReLU keeps a NaN, as PyTorch's
    } else {
      EXPECT_EQ(y, c.max);
      EXPECT_EQ(y_relu, std::max(c.max, 0.0f));
    }
  }
}

TEST(MaxPool2, ReluFusedEqualsReluThenPool) {
  const int N = 2, C = 3, H = 6, W = 4;
  const size_t nx = size_t(N) * C * H * W, ny = nx / 4;
  Vec x = random_vec(nx, 63), r = random_vec(ny, 64);
  for (int i : {0, 1, W, W + 1}) x[i] = -0.5f - 0.1f * i;  // the first window entirely negative
  Vec y(ny), dx(nx);
  std::vector<int32_t> arg(ny);
  ae::cpu::maxpool2_relu_forward(x.data(), y.data(), arg.data(), N, C, H, W);
  DVec xd = to_double(x), rd = to_double(r);
  auto relu_pool = [&](const DVec& v) {
    DVec relu(nx), yy(ny);
    std::vector<int32_t> a(ny);
    for (size_t i = 0; i < nx; ++i) relu[i] = std::max(v[i], 0.0);
    ae::ref::maxpool2_forward(relu.data(), yy.data(), a.data(), N, C, H, W);
    return yy;
  };
  EXPECT_LT(rel_err(y, relu_pool(xd)), 1e-12);
  EXPECT_EQ(y[0], 0.0f);
  DVec g = finite_diff(xd, [&](const DVec& v) { return dot(relu_pool(v), rd); });
  ae::cpu::maxpool2_relu_backward(r.data(), arg.data(), y.data(), dx.data(), N, C, H, W);
  EXPECT_LT(rel_err(dx, g), 1e-7);
}

TEST(Upsample2, ForwardAndBackward) {
  const int N = 2, C = 3, H = 3, W = 5;
  const size_t nx = size_t(N) * C * H * W, ny = nx * 4;
  Vec x = random_vec(nx, 71), r = random_vec(ny, 72), y(ny), dx(nx);
  DVec xd = to_double(x), y_ref(ny), rd = to_double(r);
  ae::cpu::upsample2_forward(x.data(), y.data(), N, C, H, W);
  ae::ref::upsample2_forward(xd.data(), y_ref.data(), N, C, H, W);
  EXPECT_LT(rel_err(y, y_ref), 1e-12);
  EXPECT_EQ(y[1], x[0]);                  // (0,1) copies (0,0)
  EXPECT_EQ(y[2 * W * 2 + 2], x[W + 1]);  // (2,2) copies (1,1)
  DVec g = finite_diff(xd, [&](const DVec& v) {
    DVec yy(ny);
    ae::ref::upsample2_forward(v.data(), yy.data(), N, C, H, W);
    return dot(yy, rd);
  });
  ae::cpu::upsample2_backward(r.data(), dx.data(), N, C, H, W);
  EXPECT_LT(rel_err(dx, g), 1e-7);
}

TEST(MseLoss, ValueAndGradient) {
  const size_t n = 300;
  Vec p = random_vec(n, 81), t = random_vec(n, 82, 0.05f, 1.0f), dp(n);
  double loss = ae::cpu::mse_loss(p.data(), t.data(), n, dp.data());
  DVec pd = to_double(p), td = to_double(t);
  EXPECT_NEAR(loss, ae::ref::mse_loss(pd.data(), td.data(), n, static_cast<double*>(nullptr)), 1e-9);
  DVec g = finite_diff(pd, [&](const DVec& v) { return ae::ref::mse_loss(v.data(), td.data(), n, static_cast<double*>(nullptr)); });
  EXPECT_LT(rel_err(dp, g), 1e-6);
  // Hand-checked: pred {1,2}, target {0,0}: (1+4)/2 = 2.5, gradient {2·1/2, 2·2/2} = {1, 2}.
  float p2[2] = {1, 2}, t2[2] = {0, 0}, d2[2];
  EXPECT_DOUBLE_EQ(ae::cpu::mse_loss(p2, t2, 2, d2), 2.5);
  EXPECT_FLOAT_EQ(d2[0], 1.0f);
  EXPECT_FLOAT_EQ(d2[1], 2.0f);
}

TEST(Optimizer, SgdMomentumWeightDecayByHand) {
  // p = 1, g = 0.5, lr 0.1, momentum 0.9, weight decay 0.01:
  // step 1: g' = 0.5 + 0.01·1 = 0.51; buf = 0.51; p = 1 - 0.051 = 0.949
  // step 2 (g = 0.5): g' = 0.5 + 0.00949 = 0.50949; buf = 0.9·0.51 + 0.50949 = 0.96849;
  //         p = 0.949 - 0.096849 = 0.852151
  float p = 1.0f, g = 0.5f, buf = 0.0f;
  ae::cpu::sgd_step(&p, &g, &buf, 1, 0.1f, 0.9f, 0.01f);
  EXPECT_NEAR(p, 0.949, 1e-6);
  EXPECT_NEAR(buf, 0.51, 1e-6);
  ae::cpu::sgd_step(&p, &g, &buf, 1, 0.1f, 0.9f, 0.01f);
  EXPECT_NEAR(buf, 0.96849, 1e-6);
  EXPECT_NEAR(p, 0.852151, 1e-6);
  // Plain SGD needs no buffer.
  float q = 2.0f, gq = -1.0f;
  ae::cpu::sgd_step(&q, &gq, nullptr, 1, 0.5f, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(q, 2.5f);
}

TEST(Optimizer, AdamByHand) {
  // Step 1 with bias correction: m̂ = g, v̂ = g², so p moves by lr·g/(|g|+eps) ≈ lr·sign(g).
  float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, -0.25f}, m[2] = {0, 0}, v[2] = {0, 0};
  ae::cpu::adam_step(p, g, m, v, 2, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f);
  EXPECT_NEAR(p[0], 0.9, 1e-6);
  EXPECT_NEAR(p[1], -1.9, 1e-6);
  EXPECT_NEAR(m[0], 0.05, 1e-7);
  EXPECT_NEAR(v[0], 0.00025, 1e-8);  // 1-β2 is not exact in float
  // Step 2, g = 0.5 again: m = 0.9·0.05 + 0.05 = 0.095, v = 0.999·0.00025 + 0.00025 = 0.00049975,
  // m̂ = 0.095/0.19 = 0.5, v̂ = 0.00049975/0.001999 = 0.25 → p = 0.9 - 0.1·0.5/0.5 = 0.8.
  float g2[2] = {0.5f, -0.25f};
  ae::cpu::adam_step(p, g2, m, v, 2, 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f);
  EXPECT_NEAR(m[0], 0.095, 1e-7);
  EXPECT_NEAR(v[0], 0.00049975, 1e-8);
  EXPECT_NEAR(p[0], 0.8, 1e-6);
  // Weight decay joins the gradient: g' = 0 + 0.5·1 = 0.5 → the same first step as above.
  float q = 1.0f, gq = 0.0f, mq = 0, vq = 0;
  ae::cpu::adam_step(&q, &gq, &mq, &vq, 1, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f);
  EXPECT_NEAR(q, 0.9, 1e-6);
}

TEST(Optimizer, ClipGradNorm) {
  float g[2] = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(ae::cpu::clip_grad_norm(g, 2, 10.0f), 5.0);  // below the limit: untouched
  EXPECT_EQ(g[0], 3.0f);
  EXPECT_DOUBLE_EQ(ae::cpu::clip_grad_norm(g, 2, 1.0f), 5.0);
  EXPECT_NEAR(g[0], 0.6, 1e-6);
  EXPECT_NEAR(g[1], 0.8, 1e-6);
  EXPECT_NEAR(ae::cpu::global_norm(g, 2), 1.0, 1e-6);
}

// ---- the shapes of the other architectures of the family --------------------------------
// Odd spatial sizes (7×7 after two pools of 28×28), channel counts 1, 3, 48 and 100 (not
// multiples of anything a kernel likes), and H ≠ W. Small enough cases run against finite
// differences at a sample of elements; the real layer sizes against layer_reference.h.

// Central differences of f at `count` elements of `at` picked by a seeded generator (all of
// them when there are fewer); returns (index, derivative) pairs.
std::vector<std::pair<size_t, double>> sampled_finite_diff(DVec at, const std::function<double(const DVec&)>& f,
                                                           size_t count, uint32_t seed, double h = 1e-6) {
  std::vector<size_t> idx(at.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (idx.size() > count) {
    std::shuffle(idx.begin(), idx.end(), std::mt19937(seed));
    idx.resize(count);
  }
  std::vector<std::pair<size_t, double>> out;
  for (size_t i : idx) {
    const double keep = at[i];
    at[i] = keep + h;
    const double up = f(at);
    at[i] = keep - h;
    const double down = f(at);
    at[i] = keep;
    out.emplace_back(i, (up - down) / (2 * h));
  }
  return out;
}

// max over the sampled elements of |ours − fd| / max |ours| (the whole tensor's scale).
double sampled_rel_err(const Vec& ours, const std::vector<std::pair<size_t, double>>& fd) {
  double scale = 1e-12, diff = 0;
  for (float v : ours) scale = std::max(scale, std::fabs(double(v)));
  for (const auto& [i, g] : fd) diff = std::max(diff, std::fabs(double(ours[i]) - g));
  return diff / scale;
}

std::string shape_name(const ConvCase& t) {
  return "N=" + std::to_string(t.N) + " C=" + std::to_string(t.C) + " K=" + std::to_string(t.K) +
         " H=" + std::to_string(t.H) + " W=" + std::to_string(t.W);
}

// Every case: input side (C <= K) and output side (C > K), 1/3/48/100 channels, odd and
// non-square sizes.
const ConvCase kNewShapeConvCases[] = {
    {2, 1, 4, 7, 7, true},   {1, 3, 48, 14, 14, true}, {1, 48, 3, 7, 9, false},
    {1, 100, 2, 5, 7, true}, {1, 2, 100, 6, 4, false}, {1, 48, 100, 3, 5, true},
};

TEST(Conv3x3, NewShapesBackwardMatchesFiniteDifferences) {
  for (const ConvCase& t : kNewShapeConvCases) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * t.H * t.W, nw = size_t(t.K) * t.C * 9;
    Vec x = random_vec(nx, 111), w = random_vec(nw, 112, -0.2f, 0.2f), b = random_vec(t.K, 113), r = random_vec(ny, 114);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b), rd = to_double(r);
    auto loss = [&](const DVec& xx, const DVec& ww, const DVec& bb) {
      DVec y(ny);
      ae::ref::conv3x3_forward(xx.data(), ww.data(), bb.data(), y.data(), t.N, t.C, t.K, t.H, t.W, false);
      return dot(y, rd);
    };
    auto gx = sampled_finite_diff(xd, [&](const DVec& v) { return loss(v, wd, bd); }, 150, 1);
    auto gw = sampled_finite_diff(wd, [&](const DVec& v) { return loss(xd, v, bd); }, 150, 2);
    auto gb = sampled_finite_diff(bd, [&](const DVec& v) { return loss(xd, wd, v); }, 150, 3);
    Vec y(ny), dx(nx), dw(nw), db(t.K);
    ae::cpu::conv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, false);
    ae::cpu::conv3x3_backward(x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H,
                              t.W);
    DVec y_ref(ny);
    ae::ref::conv3x3_forward(xd.data(), wd.data(), bd.data(), y_ref.data(), t.N, t.C, t.K, t.H, t.W, false);
    EXPECT_LT(rel_err(y, y_ref), 1e-5) << shape_name(t);
    EXPECT_LT(sampled_rel_err(dx, gx), 1e-5) << "dx, " << shape_name(t);
    EXPECT_LT(sampled_rel_err(dw, gw), 1e-5) << "dw, " << shape_name(t);
    EXPECT_LT(sampled_rel_err(db, gb), 1e-5) << "db, " << shape_name(t);
  }
}

TEST(UpConv3x3, NewShapesBackwardMatchesFiniteDifferences) {
  // H, W: the low-resolution input; the output is 2H × 2W.
  const ConvCase cases[] = {{2, 1, 3, 7, 7, true},   {1, 48, 3, 7, 5, false}, {1, 3, 48, 4, 6, true},
                            {1, 100, 1, 3, 5, false}, {1, 1, 100, 2, 3, true}, {1, 100, 48, 2, 2, true}};
  for (const ConvCase& t : cases) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * 4 * t.H * t.W,
                 nw = size_t(t.K) * t.C * 9;
    Vec x = random_vec(nx, 121), w = random_vec(nw, 122, -0.2f, 0.2f), b = random_vec(t.K, 123), r = random_vec(ny, 124);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b), rd = to_double(r);
    auto loss = [&](const DVec& xx, const DVec& ww, const DVec& bb) { return dot(upsample_then_conv(xx, ww, bb, t, false), rd); };
    auto gx = sampled_finite_diff(xd, [&](const DVec& v) { return loss(v, wd, bd); }, 150, 4);
    auto gw = sampled_finite_diff(wd, [&](const DVec& v) { return loss(xd, v, bd); }, 150, 5);
    auto gb = sampled_finite_diff(bd, [&](const DVec& v) { return loss(xd, wd, v); }, 150, 6);
    Vec y(ny), dx(nx), dw(nw), db(t.K);
    ae::cpu::upconv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
    ae::cpu::upconv3x3_backward(x.data(), w.data(), r.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H, t.W);
    EXPECT_LT(rel_err(y, upsample_then_conv(xd, wd, bd, t, t.relu)), 1e-5) << shape_name(t);
    EXPECT_LT(sampled_rel_err(dx, gx), 1e-5) << "dx, " << shape_name(t);
    EXPECT_LT(sampled_rel_err(dw, gw), 1e-5) << "dw, " << shape_name(t);
    EXPECT_LT(sampled_rel_err(db, gb), 1e-5) << "db, " << shape_name(t);
  }
}

// Every layer of 1×28×28 {64,32}, 3×32×32 {96,48,24} and 1×16×24 {8} at its real size,
// forward and backward against layer_reference.h (plain convolutions and upsample+conv pairs).
struct LayerCase {
  ConvCase shape;  // for an upsampled layer H, W are the low-resolution input's
  bool upsample;
};
const LayerCase kNewModelLayers[] = {
    // 1×28×28, encoder 64, 32
    {{2, 1, 64, 28, 28, true}, false}, {{2, 64, 32, 14, 14, true}, false}, {{2, 32, 32, 7, 7, true}, false},
    {{2, 32, 64, 7, 7, true}, true},   {{2, 64, 1, 14, 14, false}, true},
    // 3×32×32, encoder 96, 48, 24
    {{2, 3, 96, 32, 32, true}, false}, {{2, 96, 48, 16, 16, true}, false}, {{2, 48, 24, 8, 8, true}, false},
    {{2, 24, 24, 4, 4, true}, false},  {{2, 24, 48, 4, 4, true}, true},    {{2, 48, 96, 8, 8, true}, true},
    {{2, 96, 3, 16, 16, false}, true},
    // 1×16×24, encoder 8
    {{2, 1, 8, 16, 24, true}, false},  {{2, 8, 8, 8, 12, true}, false},    {{2, 8, 1, 8, 12, false}, true},
};

TEST(Conv3x3, NewModelLayersMatchReference) {
  for (const LayerCase& lc : kNewModelLayers) {
    const ConvCase& t = lc.shape;
    const int s = lc.upsample ? 2 : 1;  // output / input size
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = size_t(t.N) * t.K * s * s * t.H * t.W,
                 nw = size_t(t.K) * t.C * 9, nu = nx * s * s;
    Vec x = random_vec(nx, 131), w = random_vec(nw, 132, -0.1f, 0.1f), b = random_vec(t.K, 133), dy = random_vec(ny, 134);
    Vec y(ny), dx(nx), dw(nw), db(t.K);
    DVec xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy);
    // Reference: upsample (when the layer has one), then the direct-loop convolution.
    DVec up(nu), y_ref(ny), dup(nu), rdx(nx), rdw(nw), rdb(t.K);
    if (lc.upsample) {
      ae::cpu::upconv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
      ae::cpu::upconv3x3_backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H,
                                  t.W);
      ae::ref::upsample2_forward(xd.data(), up.data(), t.N, t.C, t.H, t.W);
    } else {
      ae::cpu::conv3x3_forward(x.data(), w.data(), b.data(), y.data(), t.N, t.C, t.K, t.H, t.W, t.relu);
      ae::cpu::conv3x3_backward(x.data(), w.data(), dy.data(), dx.data(), dw.data(), db.data(), t.N, t.C, t.K, t.H,
                                t.W);
      up = xd;
    }
    const int Ho = s * t.H, Wo = s * t.W;
    ae::ref::conv3x3_forward(up.data(), wd.data(), bd.data(), y_ref.data(), t.N, t.C, t.K, Ho, Wo, t.relu);
    ae::ref::conv3x3_backward_data(dyd.data(), wd.data(), dup.data(), t.N, t.C, t.K, Ho, Wo);
    ae::ref::conv3x3_backward_weights(up.data(), dyd.data(), rdw.data(), rdb.data(), t.N, t.C, t.K, Ho, Wo);
    if (lc.upsample)
      ae::ref::upsample2_backward(dup.data(), rdx.data(), t.N, t.C, t.H, t.W);
    else
      rdx = dup;
    const std::string name = shape_name(t) + (lc.upsample ? " (upsampled)" : "");
    EXPECT_LT(rel_err(y, y_ref), 1e-5) << name;
    EXPECT_LT(rel_err(dx, rdx), 1e-5) << name;
    EXPECT_LT(rel_err(dw, rdw), 1e-5) << name;
    EXPECT_LT(rel_err(db, rdb), 1e-5) << name;
  }
}

// The fused ReLU + pool on the encoder outputs of the new shapes: 14×14 → 7×7 (odd
// output), non-square, 1, 3, 48 and 100 channels.
TEST(MaxPool2, ReluFusedNewShapesMatchFiniteDifferences) {
  struct PoolCase {
    int N, C, H, W;
  } cases[] = {{2, 1, 14, 14}, {1, 3, 6, 10}, {1, 48, 14, 14}, {1, 100, 4, 6}, {1, 3, 16, 24}};
  for (const PoolCase& t : cases) {
    const size_t nx = size_t(t.N) * t.C * t.H * t.W, ny = nx / 4;
    Vec x = random_vec(nx, 141), r = random_vec(ny, 142), y(ny), dx(nx);
    std::vector<int32_t> arg(ny), arg_ref(ny);
    ae::cpu::maxpool2_relu_forward(x.data(), y.data(), arg.data(), t.N, t.C, t.H, t.W);
    DVec xd = to_double(x), rd = to_double(r);
    auto relu_pool = [&](const DVec& v, std::vector<int32_t>* a) {
      DVec relu(nx), yy(ny);
      std::vector<int32_t> scratch(ny);
      for (size_t i = 0; i < nx; ++i) relu[i] = std::max(v[i], 0.0);
      ae::ref::maxpool2_forward(relu.data(), yy.data(), a ? a->data() : scratch.data(), t.N, t.C, t.H, t.W);
      return yy;
    };
    EXPECT_LT(rel_err(y, relu_pool(xd, &arg_ref)), 1e-12);
    for (size_t i = 0; i < ny; ++i) {  // where the window has a positive value the picks agree
      if (y[i] > 0) {
        ASSERT_EQ(arg[i], arg_ref[i]) << "element " << i;
      }
    }
    auto g = sampled_finite_diff(xd, [&](const DVec& v) { return dot(relu_pool(v, nullptr), rd); }, 400, 7);
    ae::cpu::maxpool2_relu_backward(r.data(), arg.data(), y.data(), dx.data(), t.N, t.C, t.H, t.W);
    EXPECT_LT(sampled_rel_err(dx, g), 1e-7) << "C=" << t.C << " H=" << t.H << " W=" << t.W;
    // The plain pool and the upsampling at the same shapes, against layer_reference.h.
    Vec yp(ny), up(nx * 4), dxp(nx);
    std::vector<int32_t> ap(ny);
    DVec yp_ref(ny), up_ref(nx * 4), rdx(nx);
    ae::cpu::maxpool2_forward(x.data(), yp.data(), ap.data(), t.N, t.C, t.H, t.W);
    ae::ref::maxpool2_forward(xd.data(), yp_ref.data(), arg_ref.data(), t.N, t.C, t.H, t.W);
    EXPECT_EQ(ap, arg_ref);
    EXPECT_LT(rel_err(yp, yp_ref), 1e-12);
    ae::cpu::maxpool2_backward(r.data(), ap.data(), dxp.data(), t.N, t.C, t.H, t.W);
    ae::ref::maxpool2_backward(rd.data(), arg_ref.data(), rdx.data(), t.N, t.C, t.H, t.W);
    EXPECT_LT(rel_err(dxp, rdx), 1e-12);
    ae::cpu::upsample2_forward(x.data(), up.data(), t.N, t.C, t.H, t.W);
    ae::ref::upsample2_forward(xd.data(), up_ref.data(), t.N, t.C, t.H, t.W);
    EXPECT_LT(rel_err(up, up_ref), 1e-12);
  }
}

}  // namespace
