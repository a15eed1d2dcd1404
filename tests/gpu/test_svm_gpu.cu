// The GPU SVM against its CPU twin (kernels/cpu/svm_*.cpp, libsvm's algorithm) on generated
// problems: support-vector counts within 2 %, predictions >= 99 % equal, decision values
// close, every pair's GPU solution optimal to the tolerance under the CPU's kernel values,
// and the GPU's internal paths (whole matrix / pair matrices / state in global memory)
// agreeing with one another. Skipped, with a message, where no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cublas_runtime.h"
#include "common/cuda_check.cuh"
#include "common/device.h"
#include "common/half.h"
#include "common/large_buffer.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/cpu/working_set.h"
#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/cuda/working_set_gpu.cuh"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/svm.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/support/select_one_lane.cuh"
#include "tests/support/dense_kernel_rows.h"
#include "tests/support/svm_reference.h"

namespace {

// Gaussian clusters around random centres: classes overlap, so there are free and bounded
// support vectors alike. Labels are drawn in random order (not grouped by class).
struct Problem {
  std::vector<float> X, X_test;
  std::vector<int32_t> y, y_test;
  int64_t n = 0, n_test = 0;
  int dim = 0;
  double gamma = 0;
};

Problem make_problem(const std::vector<int32_t>& labels, const std::vector<int>& class_sizes, int dim, double spread,
                     int64_t n_test, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  Problem pr;
  pr.dim = dim;
  std::vector<std::vector<float>> centres(labels.size(), std::vector<float>(dim));
  for (auto& c : centres)
    for (auto& v : c) v = static_cast<float>(spread) * normal(rng);
  std::vector<int> pool;
  for (size_t c = 0; c < labels.size(); ++c) pool.insert(pool.end(), class_sizes[c], static_cast<int>(c));
  std::shuffle(pool.begin(), pool.end(), rng);
  auto sample = [&](int c, std::vector<float>& X, std::vector<int32_t>& y) {
    for (int f = 0; f < dim; ++f) X.push_back(centres[c][f] + normal(rng));
    y.push_back(labels[c]);
  };
  for (int c : pool) sample(c, pr.X, pr.y);
  std::uniform_int_distribution<int> any(0, static_cast<int>(labels.size()) - 1);
  for (int64_t r = 0; r < n_test; ++r) sample(any(rng), pr.X_test, pr.y_test);
  pr.n = static_cast<int64_t>(pr.y.size());
  pr.n_test = n_test;
  double sum = 0, sq = 0;
  for (float v : pr.X) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double cnt = static_cast<double>(pr.X.size()), var = sq / cnt - (sum / cnt) * (sum / cnt);
  pr.gamma = 1.0 / (dim * var);  // gamma = 'scale'
  return pr;
}

svm::FitParams params(double C, double gamma, svm::KernelType kernel = svm::KernelType::rbf) {
  svm::FitParams p;
  p.kernel = kernel;
  p.C = C;
  p.gamma = gamma;
  p.tol = 1e-3;
  return p;
}

std::vector<double> decisions(const svm::Model& m, const std::vector<float>& X, int64_t n, bool gpu) {
  std::vector<double> dec(static_cast<size_t>(n) * m.n_pairs());
  if (gpu)
    svm::decision_values_gpu(m, X.data(), n, dec.data());
  else
    svm::decision_values_cpu(m, X.data(), n, dec.data());
  return dec;
}

double agreement(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int64_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return static_cast<double>(same) / static_cast<double>(a.size());
}

// ‖a − b‖ / ‖b‖.
double relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// For every pair of a model: its alphas recovered from the libsvm layout, checked against
// the box and equality constraints and for optimality (KKT gap) under CPU kernel values.
// `weights`: the class weights of the fit (each class's bound is C times its weight).
void expect_pairs_optimal(const svm::Model& m, const Problem& pr, double C, double gap_limit,
                          const svm::ClassWeights& weights = {}) {
  const int k = static_cast<int>(m.classes.size());
  const int64_t n_sv = m.n_sv();
  std::vector<int64_t> sv_pos(static_cast<size_t>(pr.n), -1);
  for (int64_t v = 0; v < n_sv; ++v) sv_pos[m.support_indices[v]] = v;
  std::vector<std::vector<int64_t>> members(k);
  for (int64_t s = 0; s < pr.n; ++s)
    members[std::lower_bound(m.classes.begin(), m.classes.end(), pr.y[s]) - m.classes.begin()].push_back(s);
  const svm::cpu::KernelSpec spec{m.kernel, m.gamma};
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b) {
      std::vector<int64_t> rows = members[a];
      rows.insert(rows.end(), members[b].begin(), members[b].end());
      const int np = static_cast<int>(rows.size());
      std::vector<float> Xp;
      for (int64_t r : rows) Xp.insert(Xp.end(), pr.X.begin() + r * pr.dim, pr.X.begin() + (r + 1) * pr.dim);
      const double Cp = C * svm::class_weight(weights, m.classes[a]), Cn = C * svm::class_weight(weights, m.classes[b]);
      std::vector<int8_t> ys(np);
      std::vector<double> alpha(np, 0.0);
      double balance = 0;
      for (int t = 0; t < np; ++t) {
        const bool first = t < static_cast<int>(members[a].size());
        ys[t] = first ? 1 : -1;
        const int64_t v = sv_pos[rows[t]];
        if (v >= 0) alpha[t] = first ? m.dual_coef[(b - 1) * n_sv + v] : -m.dual_coef[a * n_sv + v];
        EXPECT_GE(alpha[t], 0.0) << "pair (" << a << "," << b << ") sample " << t;
        EXPECT_LE(alpha[t], first ? Cp : Cn) << "pair (" << a << "," << b << ") sample " << t;
        balance += ys[t] * alpha[t];
      }
      EXPECT_NEAR(balance, 0.0, 1e-9 * std::max(Cp, Cn) * np) << "pair (" << a << "," << b << "): y'alpha != 0";
      auto kr = svm_test::DenseKernelRows::by_cpu_blocks(spec, Xp.data(), np, pr.dim);
      const double gap = svm::cpu::kkt_gap(kr, ys.data(), np, Cp, Cn, alpha);
      EXPECT_LE(gap, gap_limit) << "pair (" << a << "," << b << "): KKT gap under CPU kernel values";
    }
}

struct Case {
  const char* name;
  std::vector<int32_t> labels;
  std::vector<int> sizes;
  int dim;
  double spread, C;
  svm::KernelType kernel;
};

void compare_with_cpu(const Case& c, uint32_t seed, const svm::ClassWeights& weights = {}) {
  SCOPED_TRACE(c.name);
  const Problem pr = make_problem(c.labels, c.sizes, c.dim, c.spread, 1500, seed);
  svm::FitParams p = params(c.C, pr.gamma, c.kernel);
  p.class_weight = weights;
  const svm::Model cpu = svm::fit_cpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr);
  svm::cuda::FitStats stats;
  const svm::Model gpu = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, {}, &stats);
  EXPECT_EQ(stats.mode, "whole-matrix");
  EXPECT_EQ(stats.pairs_hit_limit, 0);

  ASSERT_EQ(gpu.classes, cpu.classes);
  ASSERT_EQ(gpu.n_pairs(), cpu.n_pairs());
  ASSERT_GT(cpu.n_sv(), 0);
  EXPECT_LE(std::abs(gpu.n_sv() - cpu.n_sv()), std::max<int64_t>(1, cpu.n_sv() / 50))
      << "support vectors: gpu " << gpu.n_sv() << ", cpu " << cpu.n_sv();
  for (size_t q = 0; q < cpu.rho.size(); ++q)
    EXPECT_NEAR(gpu.rho[q], cpu.rho[q], 2e-2 * (1 + std::abs(cpu.rho[q]))) << "rho of pair " << q;

  const std::vector<double> dec_cpu = decisions(cpu, pr.X_test, pr.n_test, false);
  const std::vector<double> dec_gpu = decisions(gpu, pr.X_test, pr.n_test, true);
  EXPECT_LE(relative_difference(dec_gpu, dec_cpu), 1e-2);
  const double agree = agreement(svm::vote(gpu, dec_gpu.data(), pr.n_test), svm::vote(cpu, dec_cpu.data(), pr.n_test));
  EXPECT_GE(agree, 0.99) << "test predictions of the GPU and CPU models";
  // The models are useful at all: clearly better than chance on the held-out rows.
  const std::vector<int32_t> pred = svm::vote(gpu, dec_gpu.data(), pr.n_test);
  EXPECT_GT(agreement(pred, pr.y_test), 1.0 / static_cast<double>(c.labels.size()) + 0.05);

  expect_pairs_optimal(gpu, pr, c.C, 10 * p.tol, weights);
  std::printf("[ %-14s] n=%lld dim=%d: sv gpu %lld cpu %lld, agreement %.4f, dec rel diff %.2e, iterations",
              c.name, static_cast<long long>(pr.n), pr.dim, static_cast<long long>(gpu.n_sv()),
              static_cast<long long>(cpu.n_sv()), agree, relative_difference(dec_gpu, dec_cpu));
  for (int64_t it : stats.pair_iterations) std::printf(" %lld", static_cast<long long>(it));
  std::printf("\n");
}

// svm-fit's upload page-locks the training rows (cae::cuda::PinnedRange): two locks of the
// same range (ranks of a group as threads) share one registration that the last releases;
// a range below the threshold is never locked; what goes up through a locked range arrives.
TEST(SvmGpuUpload, PinnedRangesShareOneRegistrationReleasedByTheLast) {
  REQUIRE_GPU();
  const size_t n = (size_t(96) << 20) / sizeof(float);
  cae::LargeVector<float> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = float(i % 1009) - 500.f;
  auto registered = [&] {
    unsigned flags = 0;
    const bool yes = cudaHostGetFlags(&flags, rows.data()) == cudaSuccess;
    cudaGetLastError();
    return yes;
  };
  ASSERT_FALSE(registered());
  cae::cuda::DeviceBuffer<float> d(n);
  {
    const cae::cuda::PinnedRange a(rows.data(), n * sizeof(float));
    EXPECT_TRUE(registered());
    {
      const cae::cuda::PinnedRange b(rows.data(), n * sizeof(float));
      ASSERT_EQ(cudaMemcpy(d.get(), rows.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    }
    EXPECT_TRUE(registered()) << "released while another lock of the range lived";
  }
  EXPECT_FALSE(registered());
  std::vector<float> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), d.get(), n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), rows.begin()));
  {
    const cae::cuda::PinnedRange small(rows.data(), cae::cuda::PinnedRange::kMinBytes - 1);
    EXPECT_FALSE(registered());
  }
}

TEST(SvmGpu, MatchesCpuOnGeneratedProblems) {
  REQUIRE_GPU();
  const std::vector<Case> cases = {
      {"3 classes", {0, 1, 2}, {150, 210, 180}, 24, 0.35, 1.0, svm::KernelType::rbf},
      {"5 classes C10", {0, 1, 2, 3, 4}, {160, 220, 130, 200, 190}, 48, 0.25, 10.0, svm::KernelType::rbf},
      {"2 classes C100", {3, 8}, {170, 140}, 16, 0.3, 100.0, svm::KernelType::rbf},
      {"linear", {0, 1, 2}, {120, 150, 100}, 20, 0.3, 0.5, svm::KernelType::linear},
      {"large pair", {0, 1}, {2600, 2400}, 32, 0.2, 10.0, svm::KernelType::rbf},
      // A pair of 11,000: two load rounds per thread in the solver (a round is 10,240), the
      // state on chip.
      {"two rounds", {0, 1}, {5700, 5300}, 16, 0.2, 10.0, svm::KernelType::rbf},
      // A pair of 13,800 whose state does not fit on chip beside two that do: the solver's
      // mixed instantiation, over two rounds in global memory.
      {"on and off chip", {0, 1, 2}, {7000, 6800, 300}, 16, 0.2, 10.0, svm::KernelType::rbf},
  };
  uint32_t seed = 11;
  for (const Case& c : cases) compare_with_cpu(c, seed++);
}

TEST(SvmGpu, OddShapesMatchCpu) {
  REQUIRE_GPU();
  // Labels not 0..k-1, a class of one sample, sizes not multiples of 32, one feature.
  compare_with_cpu({"odd labels", {9, 2, 7}, {1, 77, 45}, 5, 0.8, 2.0, svm::KernelType::rbf}, 5);
  compare_with_cpu({"one feature", {0, 1}, {33, 31}, 1, 1.0, 1.0, svm::KernelType::rbf}, 6);
}

// libsvm's -wi on the GPU: each class's bound C·w in the SMO blocks, the same model as the
// CPU solver's; and the weights change the model (a weighted class gets larger coefficients).
TEST(SvmGpu, ClassWeightsMatchCpu) {
  REQUIRE_GPU();
  const svm::ClassWeights weights{{0, 4.0}, {2, 0.25}, {3, 1.5}};
  const Case c{"weighted", {0, 1, 2, 3}, {150, 90, 200, 120}, 24, 0.5, 1.0, svm::KernelType::rbf};
  compare_with_cpu(c, 21, weights);
  const Problem pr = make_problem(c.labels, c.sizes, c.dim, c.spread, 1500, 21);
  svm::FitParams p = params(c.C, pr.gamma, c.kernel);
  const svm::Model plain = svm::fit_gpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr);
  p.class_weight = weights;
  const svm::Model weighted = svm::fit_gpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr);
  EXPECT_NE(weighted.dual_coef, plain.dual_coef);
  // Class 0's largest coefficient against class 1 exceeds the unweighted bound C.
  const double largest = *std::max_element(weighted.dual_coef.begin(), weighted.dual_coef.begin() + weighted.n_support[0]);
  EXPECT_GT(largest, c.C);
  EXPECT_LE(largest, 4.0 * c.C);
}

// The whole matrix, working sets (in lanes over rounds of pairs) and the whole matrix with the
// solver's state in global memory: the same optimum, so their models agree closely.
TEST(SvmGpu, StoragePathsAgree) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1, 2, 3}, {140, 260, 190, 210}, 30, 0.3, 800, 21);
  const svm::FitParams p = params(10.0, pr.gamma);
  svm::cuda::FitStats whole_stats, pair_stats, global_stats;
  const svm::Model whole = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, {}, &whole_stats);
  svm::cuda::FitOptions pair_opt;
  pair_opt.path = svm::cuda::FitOptions::Path::working_set;
  pair_opt.working_set_lanes = 2;  // three rounds of lanes over the 6 pairs
  int calls = 0, last = 0;
  const svm::Model paired = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p,
                                          [&](int done, int total) {
                                            ++calls;
                                            last = done;
                                            EXPECT_EQ(total, 6);
                                          },
                                          pair_opt, &pair_stats);
  svm::cuda::FitOptions global_opt;
  global_opt.state_in_global_memory = true;
  const svm::Model global = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, global_opt, &global_stats);
  EXPECT_EQ(whole_stats.mode, "whole-matrix");
  EXPECT_EQ(pair_stats.mode, "working-set");
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(last, 6);
  const std::vector<double> ref = decisions(whole, pr.X_test, pr.n_test, true);
  for (const svm::Model* other : {&paired, &global}) {
    EXPECT_LE(std::abs(other->n_sv() - whole.n_sv()), 2);
    const std::vector<double> dec = decisions(*other, pr.X_test, pr.n_test, true);
    EXPECT_LE(relative_difference(dec, ref), 1e-3);
    EXPECT_GE(agreement(svm::vote(*other, dec.data(), pr.n_test), svm::vote(whole, ref.data(), pr.n_test)), 0.995);
  }
  // Same kernel values (whole matrix both times): the global-memory path is the same
  // computation step for step.
  EXPECT_EQ(global_stats.pair_iterations, whole_stats.pair_iterations);
  EXPECT_EQ(global.dual_coef, whole.dual_coef);
  EXPECT_EQ(global.rho, whole.rho);
}

// One kernel matrix for several C (cross-validation's path) gives exactly the models of
// separate fits; working sets solve each C alone, as a separate fit does.
TEST(SvmGpu, EveryCFromOneKernelMatrixEqualsSeparateFits) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1, 2, 3}, {140, 260, 190, 210}, 30, 0.3, 800, 23);
  const std::vector<double> Cs = {0.5, 10.0, 3.0};
  svm::cuda::FitOptions pair_opt;
  pair_opt.path = svm::cuda::FitOptions::Path::working_set;
  for (const svm::cuda::FitOptions& opt : {svm::cuda::FitOptions{}, pair_opt}) {
    svm::cuda::FitStats stats;
    const std::vector<svm::Model> each =
        svm::cuda::fit_each_C(pr.X.data(), pr.y.data(), pr.n, pr.dim, params(1.0, pr.gamma), Cs, nullptr, opt, &stats);
    ASSERT_EQ(each.size(), Cs.size());
    for (size_t c = 0; c < Cs.size(); ++c) {
      const svm::Model alone =
          svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, params(Cs[c], pr.gamma), nullptr, opt, nullptr);
      EXPECT_EQ(each[c].support_indices, alone.support_indices) << stats.mode << " C " << Cs[c];
      EXPECT_EQ(each[c].dual_coef, alone.dual_coef) << stats.mode << " C " << Cs[c];
      EXPECT_EQ(each[c].rho, alone.rho) << stats.mode << " C " << Cs[c];
    }
    // C matters: the smallest C bounds more coefficients, so the models differ.
    EXPECT_NE(each[0].dual_coef, each[1].dual_coef);
  }
}

// split_tf32 (the RBF kernel matrix's operands) against its definition: hi the float with
// the low 13 significand bits clear nearest to x (ties away from zero), lo the same of x − hi.
TEST(SvmGpu, SplitTf32IsTheNearestTf32AndItsRemainder) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> exponent(-20, 20);
  std::vector<float> x(1 << 20);
  for (float& v : x) v = static_cast<float>((rng() % 2 ? 1 : -1) * std::exp2(exponent(rng)));
  x[0] = 0.0f;
  x[1] = 1.0f + std::ldexp(1.0f, -11);  // a tie: away from zero, to 1 + 2^-10
  auto tf32 = [](float v) {  // the CPU twin: nearest of the two neighbours, ties away
    uint32_t u;
    std::memcpy(&u, &v, 4);
    uint32_t down = u & 0xffffe000u, up = down + 0x2000u;
    float d, w;
    std::memcpy(&d, &down, 4);
    std::memcpy(&w, &up, 4);
    return std::fabs(double(v) - d) < std::fabs(double(w) - v) ? d : w;
  };
  cae::cuda::DeviceBuffer<float> d_x(x.size()), d_lo(x.size());
  AE_CUDA_CHECK(cudaMemcpy(d_x.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  svm::cuda::split_tf32(d_x.get(), d_lo.get(), static_cast<int64_t>(x.size()), nullptr);
  std::vector<float> hi(x.size()), lo(x.size());
  AE_CUDA_CHECK(cudaMemcpy(hi.data(), d_x.get(), x.size() * 4, cudaMemcpyDeviceToHost));
  AE_CUDA_CHECK(cudaMemcpy(lo.data(), d_lo.get(), x.size() * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(hi[1], 1.0f + std::ldexp(1.0f, -10));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(hi[i], tf32(x[i])) << x[i];
    ASSERT_EQ(lo[i], tf32(x[i] - hi[i])) << x[i];
    ASSERT_LE(std::fabs(double(hi[i]) + lo[i] - x[i]), std::ldexp(std::fabs(double(x[i])), -21)) << x[i];
  }
}

// decision_values_gpu against decision_values_cpu on one and the same (CPU-trained) model.
// Rows on the device are device_row_stride(dim) floats apart, a multiple of 32, with zeros past
// the features (the GEMMs run over them): scatter_rows writes the zeros over whatever the
// buffer held, and row_squared_norms sums only a row's own features — the CPU's norms to the
// bit on rows whose stride is not their length.
TEST(SvmGpu, PaddedRowsHoldZerosPastTheirFeatures) {
  REQUIRE_GPU();
  EXPECT_EQ(svm::cuda::device_row_stride(1), 32);
  EXPECT_EQ(svm::cuda::device_row_stride(32), 32);
  EXPECT_EQ(svm::cuda::device_row_stride(7209), 7232);
  const int dim = 37;
  const int64_t n = 300, ld = svm::cuda::device_row_stride(dim);
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> X(static_cast<size_t>(n) * dim);
  for (float& v : X) v = normal(rng);
  std::vector<int64_t> places(static_cast<size_t>(n));
  std::iota(places.begin(), places.end(), int64_t{0});
  std::shuffle(places.begin(), places.end(), rng);
  cae::cuda::DeviceBuffer<float> d_X(X.size()), d_out(static_cast<size_t>(n * ld));
  cae::cuda::DeviceBuffer<int64_t> d_places(places.size());
  cae::cuda::DeviceBuffer<double> d_norms(static_cast<size_t>(n));
  AE_CUDA_CHECK(cudaMemcpy(d_X.get(), X.data(), X.size() * 4, cudaMemcpyHostToDevice));
  AE_CUDA_CHECK(cudaMemcpy(d_places.get(), places.data(), places.size() * 8, cudaMemcpyHostToDevice));
  AE_CUDA_CHECK(cudaMemset(d_out.get(), 0xff, static_cast<size_t>(n * ld) * 4));  // NaNs
  svm::cuda::scatter_rows(d_X.get(), d_places.get(), n, dim, ld, d_out.get(), nullptr);
  svm::cuda::row_squared_norms(d_out.get(), n, dim, ld, d_norms.get(), nullptr);
  std::vector<float> out(static_cast<size_t>(n * ld));
  std::vector<double> norms(static_cast<size_t>(n)), cpu_norms(static_cast<size_t>(n));
  AE_CUDA_CHECK(cudaMemcpy(out.data(), d_out.get(), out.size() * 4, cudaMemcpyDeviceToHost));
  AE_CUDA_CHECK(cudaMemcpy(norms.data(), d_norms.get(), norms.size() * 8, cudaMemcpyDeviceToHost));
  for (int64_t r = 0; r < n; ++r) {
    const float* row = out.data() + places[static_cast<size_t>(r)] * ld;
    for (int f = 0; f < dim; ++f) ASSERT_EQ(row[f], X[static_cast<size_t>(r * dim + f)]) << r << " " << f;
    for (int64_t f = dim; f < ld; ++f) ASSERT_EQ(row[f], 0.0f) << r << " " << f;
  }
  // Row norms of the placed rows, in the lanes' order: lane l sums features l, l + 32, ...;
  // then the lanes pairwise as the kernel's shuffle tree does.
  for (int64_t p = 0; p < n; ++p) {
    const float* row = out.data() + p * ld;
    double lane[32] = {};
    for (int f = 0; f < dim; ++f) lane[f % 32] += double(row[f]) * double(row[f]);
    for (int off = 16; off > 0; off >>= 1)
      for (int l = 0; l < off; ++l) lane[l] += lane[l + off];
    cpu_norms[static_cast<size_t>(p)] = lane[0];
  }
  for (int64_t p = 0; p < n; ++p) ASSERT_EQ(norms[static_cast<size_t>(p)], cpu_norms[static_cast<size_t>(p)]) << p;
}

TEST(SvmGpu, DecisionValuesMatchCpuOnTheSameModel) {
  REQUIRE_GPU();
  for (svm::KernelType kernel : {svm::KernelType::rbf, svm::KernelType::linear}) {
    const Problem pr = make_problem({0, 1, 2, 3, 4, 5}, {90, 120, 60, 110, 80, 100}, 40, 0.3, 3000, 31);
    const svm::Model m = svm::fit_cpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, params(5.0, pr.gamma, kernel), nullptr);
    const std::vector<double> cpu = decisions(m, pr.X_test, pr.n_test, false);
    const std::vector<double> gpu = decisions(m, pr.X_test, pr.n_test, true);
    double worst = 0;
    for (size_t i = 0; i < cpu.size(); ++i) worst = std::max(worst, std::abs(gpu[i] - cpu[i]) / (1 + std::abs(cpu[i])));
    EXPECT_LE(worst, 1e-4) << svm::kernel_name(kernel);
    EXPECT_GE(agreement(svm::vote(m, gpu.data(), pr.n_test), svm::vote(m, cpu.data(), pr.n_test)), 0.998);
  }
}

// The GPU's decision values keep true FP32 products (svm_gpu.cu, dots_rowmajor): linear
// decision values of 8,192-d rows against a double-precision reference, next to the CPU's
// float32 SGEMM. TF32 products would be ~2^-12 off each, ~0.02 over a dot of 8,192.
TEST(SvmGpu, DotProductsAreAsAccurateAsFloat32s) {
  REQUIRE_GPU();
  const int dim = 8192, n_sv = 300, n = 200;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  svm::Model m;
  m.kernel = svm::KernelType::linear;
  m.dim = dim;
  m.classes = {0, 1};
  m.n_support = {n_sv / 2, n_sv - n_sv / 2};
  m.support_indices.resize(n_sv);
  m.support_vectors.resize(static_cast<size_t>(n_sv) * dim);
  for (float& v : m.support_vectors) v = normal(rng);  // standardised, as the Classifier's rows
  m.dual_coef.resize(n_sv);
  for (double& a : m.dual_coef) a = normal(rng);
  m.rho = {0.25};
  std::vector<float> X(static_cast<size_t>(n) * dim);
  for (float& v : X) v = normal(rng);
  std::vector<double> exact(n);
  for (int r = 0; r < n; ++r) {
    double sum = 0;
    for (int v = 0; v < n_sv; ++v) {
      double dot = 0;
      for (int f = 0; f < dim; ++f) dot += double(X[size_t(r) * dim + f]) * m.support_vectors[size_t(v) * dim + f];
      sum += m.dual_coef[v] * dot;
    }
    exact[r] = sum - m.rho[0];
  }
  const std::vector<double> gpu = decisions(m, X, n, true), cpu = decisions(m, X, n, false);
  double gpu_err = 0, cpu_err = 0, scale = 0;
  for (int r = 0; r < n; ++r) {
    gpu_err = std::max(gpu_err, std::abs(gpu[r] - exact[r]));
    cpu_err = std::max(cpu_err, std::abs(cpu[r] - exact[r]));
    scale = std::max(scale, std::abs(exact[r]));
  }
  // A dot of 8,192 products of ±1 is ~±90: float32's rounding of its running sum leaves
  // ~1e-4 of error.
  std::printf("linear decision values up to %.0f: largest error %.3g on the GPU, %.3g on the CPU\n", scale, gpu_err,
              cpu_err);
  EXPECT_LE(gpu_err, 10 * cpu_err);
  EXPECT_GT(cpu_err, 0);
}

// The Classifier (what svm-fit and svm-eval run) on either device: scaler, gamma and mask are
// the same host code, so the two fits differ only in the solver. Features with an extra
// scale per column and two constant columns, as an encoder's ReLU codes have.
TEST(SvmGpu, ClassifierOnGpuMatchesCpu) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1, 2, 3}, {180, 150, 210, 160}, 24, 0.3, 1200, 51);
  const int D = pr.dim + 2;
  auto widen = [&](const std::vector<float>& X, int64_t n, float shift) {
    std::vector<float> out(static_cast<size_t>(n) * D);
    for (int64_t r = 0; r < n; ++r) {
      for (int f = 0; f < pr.dim; ++f) out[r * D + f] = X[r * pr.dim + f] * static_cast<float>(1 + f % 5) + 0.5f;
      out[r * D + pr.dim] = 0.0f;
      out[r * D + pr.dim + 1] = 1.5f + (r % 3 ? 0.0f : shift);  // off the training value on test rows
    }
    return out;
  };
  const std::vector<float> train = widen(pr.X, pr.n, 0.0f), test = widen(pr.X_test, pr.n_test, 0.2f);
  svm::ClassifierParams params;
  params.C = 10;
  svm::Classifier on_cpu, on_gpu;
  std::vector<float> a = train, b = train;
  on_cpu.fit(a.data(), pr.y.data(), pr.n, D, params, cae::Device::cpu);
  on_gpu.fit(b.data(), pr.y.data(), pr.n, D, params, cae::Device::gpu);
  EXPECT_EQ(on_gpu.file().device, "gpu");
  EXPECT_EQ(on_gpu.file().scaler.mean, on_cpu.file().scaler.mean);
  EXPECT_EQ(on_gpu.file().feature_mask, on_cpu.file().feature_mask);
  EXPECT_EQ(on_gpu.n_features_kept(), D - 2);
  EXPECT_EQ(on_gpu.resolved_gamma(), on_cpu.resolved_gamma());
  EXPECT_LE(std::abs(on_gpu.model().n_sv() - on_cpu.model().n_sv()), std::max<int64_t>(1, on_cpu.model().n_sv() / 50));
  std::vector<float> t1 = test, t2 = test, t3 = test;
  const std::vector<double> dec_cpu = on_cpu.decision_values(t1.data(), pr.n_test, cae::Device::cpu);
  const std::vector<double> dec_gpu = on_gpu.decision_values(t2.data(), pr.n_test, cae::Device::gpu);
  EXPECT_LE(relative_difference(dec_gpu, dec_cpu), 1e-2);
  EXPECT_GE(agreement(on_gpu.vote(dec_gpu, pr.n_test), on_cpu.vote(dec_cpu, pr.n_test)), 0.99);
  // One model, decision values on both devices (scaling, mask and correction on the host).
  const std::vector<double> dec_cpu_of_gpu_model = on_gpu.decision_values(t3.data(), pr.n_test, cae::Device::cpu);
  double worst = 0;
  for (size_t i = 0; i < dec_gpu.size(); ++i)
    worst = std::max(worst, std::abs(dec_gpu[i] - dec_cpu_of_gpu_model[i]) / (1 + std::abs(dec_cpu_of_gpu_model[i])));
  EXPECT_LE(worst, 1e-4);
}

// Rows like an encoder's codes for the preparation tests: non-negative, many exact zeros, a
// scale per column, constant columns (one all zero, one all 1.5) and one column constant but
// for a single row; dim spans several of the row passes' 256-column tiles.
std::vector<float> code_like_rows(int64_t n, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> X(static_cast<size_t>(n) * dim);
  for (int64_t r = 0; r < n; ++r)
    for (int f = 0; f < dim; ++f) {
      const float v = u(rng);
      X[static_cast<size_t>(r * dim + f)] = v < 0.3f ? 0.0f : v * static_cast<float>(1 + f % 7) * 3.0f;
    }
  for (int64_t r = 0; r < n; ++r) {
    X[static_cast<size_t>(r * dim + 3)] = 0.0f;
    X[static_cast<size_t>(r * dim + 300)] = 1.5f;
    X[static_cast<size_t>(r * dim + 301)] = r == n / 2 ? 2.0f : 1.5f;
  }
  return X;
}

// Labels that follow the rows a little (classes 0-2), so a fit on them has structure.
std::vector<int32_t> labels_following(const std::vector<float>& X, int64_t n, int dim) {
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    for (int f = 10; f < 40; ++f) s += X[static_cast<size_t>(r * dim + f)];
    y[static_cast<size_t>(r)] = static_cast<int32_t>(r % 3 == 0 ? (r / 3) % 3 : static_cast<int64_t>(s) % 3);
  }
  return y;
}

// Two fits that must be one model bit for bit: scaler, mask, gamma, support vectors, duals.
void expect_same_classifier(const svm::Classifier& got, const svm::Classifier& want) {
  EXPECT_EQ(got.file().scaler.mean, want.file().scaler.mean);
  EXPECT_EQ(got.file().scaler.scale, want.file().scaler.scale);
  EXPECT_EQ(got.file().feature_mask, want.file().feature_mask);
  EXPECT_EQ(got.file().dropped_values, want.file().dropped_values);
  EXPECT_EQ(got.resolved_gamma(), want.resolved_gamma());
  const svm::Model &gm = got.model(), &wm = want.model();
  EXPECT_GT(wm.n_sv(), 0);
  EXPECT_EQ(gm.support_indices, wm.support_indices);
  EXPECT_EQ(gm.n_support, wm.n_support);
  EXPECT_EQ(gm.rho, wm.rho);
  EXPECT_EQ(gm.dual_coef, wm.dual_coef);
  ASSERT_EQ(gm.support_vectors.size(), wm.support_vectors.size());
  EXPECT_TRUE(std::equal(gm.support_vectors.begin(), gm.support_vectors.end(), wm.support_vectors.begin()));
}

// prepare_training_rows_gpu (with the host's scaler, as svm-fit fits it) against
// prepare_training_rows: every number bit for bit, and the
// rows it leaves on the device equal to the host's scaled, compacted rows in their
// class-sorted places; X itself left as it was.
TEST(SvmGpu, RowsPreparedOnTheDeviceEqualTheHosts) {
  REQUIRE_GPU();
  const int64_t n = 1000;  // not a multiple of the passes' 32-row tiles
  const int dim = 600;     // three column tiles, the last partial
  const std::vector<float> X = code_like_rows(n, dim, 7);
  std::vector<int32_t> y(static_cast<size_t>(n));
  std::mt19937 rng(3);
  for (int32_t& label : y) label = static_cast<int32_t>(rng() % 4) * 3;  // classes 0, 3, 6, 9
  for (bool standardize : {true, false}) {
    std::vector<float> host = X;
    const svm::PreparedRows want = svm::prepare_training_rows(host.data(), n, dim, standardize);
    const svm::Scaler scaler = standardize ? svm::fit_standard_scaler(X.data(), n, dim) : svm::identity_scaler(dim);
    svm::PreparedRows got;
    const std::shared_ptr<svm::DeviceRows> rows = svm::prepare_training_rows_gpu(X.data(), y.data(), n, dim, scaler, got);
    ASSERT_TRUE(rows);
    EXPECT_EQ(got.scaler.mean, want.scaler.mean) << standardize;
    EXPECT_EQ(got.scaler.scale, want.scaler.scale) << standardize;
    EXPECT_EQ(got.gamma_scale, want.gamma_scale) << standardize;
    EXPECT_EQ(got.keep, want.keep) << standardize;
    EXPECT_EQ(got.dropped_values, want.dropped_values) << standardize;
    ASSERT_EQ(got.kept, want.kept) << standardize;
    EXPECT_EQ(got.kept, dim - 2);  // 3 and 300 dropped; 301 differs in one row
    ASSERT_EQ(rows->n, n);
    ASSERT_EQ(rows->dim, got.kept);
    ASSERT_EQ(rows->ld, svm::cuda::device_row_stride(got.kept));
    std::vector<float> device(static_cast<size_t>(n * rows->ld));
    AE_CUDA_CHECK(cudaMemcpy(device.data(), rows->X.get(), device.size() * 4, cudaMemcpyDeviceToHost));
    const std::vector<int64_t> place = svm::cuda::class_sorted_places(y.data(), n);
    for (int64_t r = 0; r < n; ++r) {
      const float* d = device.data() + place[static_cast<size_t>(r)] * rows->ld;
      for (int i = 0; i < got.kept; ++i) ASSERT_EQ(d[i], host[static_cast<size_t>(r * got.kept + i)]) << r << " " << i;
      for (int64_t i = got.kept; i < rows->ld; ++i) ASSERT_EQ(d[i], 0.0f);
    }
    // scaled_kept_rows makes the same rows from X: a GPU-prepared fit's support vectors.
    const std::vector<int64_t> some = {0, 17, n / 2, n - 1};
    std::vector<float> made(some.size() * static_cast<size_t>(got.kept));
    svm::scaled_kept_rows(got, X.data(), dim, some.data(), static_cast<int64_t>(some.size()), made.data());
    for (size_t v = 0; v < some.size(); ++v)
      for (int i = 0; i < got.kept; ++i)
        ASSERT_EQ(made[v * got.kept + i], host[static_cast<size_t>(some[v] * got.kept + i)]);
  }
  // The places: classes ascending, each class's rows in training order.
  const std::vector<int32_t> labels = {5, 2, 5, 9, 2};
  EXPECT_EQ(svm::cuda::class_sorted_places(labels.data(), 5), (std::vector<int64_t>{2, 0, 3, 4, 1}));
}

// svm-fit's single GPU fit (PreparedSet on the GPU device) against the same fit on rows the
// host prepared: one model, bit for bit — the same rows reach the same solver. Its rows
// serve that one fit.
TEST(SvmGpu, FitOnRowsPreparedOnTheDeviceEqualsTheHostPreparedFit) {
  REQUIRE_GPU();
  const int64_t n = 900;
  const int dim = 300;
  const std::vector<float> X = code_like_rows(n, dim, 11);
  const std::vector<int32_t> y = labels_following(X, n, dim);
  svm::ClassifierParams params;
  params.C = 10;
  params.log_summary = false;
  std::vector<float> a = X, b = X;
  const svm::PreparedSet on_host(a.data(), y.data(), n, dim, params);
  const svm::PreparedSet on_device(b.data(), y.data(), n, dim, params, svm::scaler_for(b.data(), n, dim, params),
                                   cae::Device::gpu);
  EXPECT_EQ(b, X);  // left as read
  const svm::Classifier want = on_host.fit(params, cae::Device::gpu);
  const svm::Classifier got = on_device.fit(params, cae::Device::gpu);
  expect_same_classifier(got, want);
  EXPECT_THROW(on_device.fit(params, cae::Device::gpu), std::logic_error);
  EXPECT_THROW(on_device.fit_each_C(params, {1.0, 10.0}, cae::Device::gpu), std::logic_error);
}

// The device's widening of rows that went up as float16: every binary16 bit pattern (and a
// tail past the last group of eight) to the host's exact float, NaN to NaN.
TEST(SvmGpu, HalvesWidenOnTheDeviceAsOnTheHost) {
  REQUIRE_GPU();
  const size_t count = 65536 + 5;
  std::vector<cae::Half> halves(count);
  for (size_t i = 0; i < count; ++i) halves[i].bits = static_cast<uint16_t>((i * 40503u) & 0xffffu);
  cae::cuda::DeviceBuffer<cae::Half> d_in(count);
  cae::cuda::DeviceBuffer<float> d_out(count);
  AE_CUDA_CHECK(cudaMemcpy(d_in.get(), halves.data(), count * sizeof(cae::Half), cudaMemcpyHostToDevice));
  svm::cuda::widen_halves(d_in.get(), d_out.get(), static_cast<int64_t>(count), nullptr);
  std::vector<float> got(count);
  AE_CUDA_CHECK(cudaMemcpy(got.data(), d_out.get(), count * sizeof(float), cudaMemcpyDeviceToHost));
  size_t seen_nan = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = cae::half_bits_to_float(halves[i].bits);
    if (std::isnan(want)) {
      ++seen_nan;
      ASSERT_TRUE(std::isnan(got[i])) << i;
    } else {
      uint32_t a, b;
      std::memcpy(&a, &want, 4);
      std::memcpy(&b, &got[i], 4);
      ASSERT_EQ(a, b) << "bits 0x" << std::hex << halves[i].bits;  // -0 stays -0, subnormals exact
    }
  }
  EXPECT_EQ(seen_nan, size_t{2046});  // every NaN pattern once (40503 is odd: a permutation), none in the tail
}

// svm-fit's single GPU fit of float16 features (PreparedSet::on_gpu: the halves go up and are
// widened there) against the fit on their floats prepared by the host: one model, bit for
// bit. Rows whose count of values is not a multiple of eight (the widening's tail).
TEST(SvmGpu, FitOnFloat16RowsWidenedOnTheDeviceEqualsTheFloatFit) {
  REQUIRE_GPU();
  const int64_t n = 901;
  const int dim = 303;
  const std::vector<float> raw = code_like_rows(n, dim, 13);
  std::vector<cae::Half> X16(raw.size());
  ASSERT_EQ(cae::floats_to_halves(raw.data(), X16.data(), raw.size()), raw.size());
  std::vector<float> X(raw.size());  // what a reader that widens gives
  cae::halves_to_floats(X16.data(), X.data(), X.size());
  const std::vector<int32_t> y = labels_following(X, n, dim);
  for (bool standardize : {true, false}) {
    svm::ClassifierParams params;
    params.C = 10;
    params.standardize = standardize;
    params.log_summary = false;
    const svm::Scaler scaler = svm::scaler_for(X16.data(), n, dim, params);
    const svm::Scaler of_floats = svm::scaler_for(X.data(), n, dim, params);
    EXPECT_EQ(scaler.mean, of_floats.mean);
    EXPECT_EQ(scaler.scale, of_floats.scale);
    std::vector<float> a = X;
    const svm::PreparedSet on_host(a.data(), y.data(), n, dim, params);
    std::optional<svm::PreparedSet> on_device =
        svm::PreparedSet::on_gpu(X16.data(), y.data(), n, dim, params, scaler, cae::Device::gpu);
    ASSERT_TRUE(on_device);
    const svm::Classifier want = on_host.fit(params, cae::Device::gpu);
    const svm::Classifier got = on_device->fit(params, cae::Device::gpu);
    expect_same_classifier(got, want);
  }
  // Fits the GPU does not prepare rows for: the caller widens them.
  svm::ClassifierParams params;
  const svm::Scaler scaler = svm::scaler_for(X16.data(), n, dim, params);
  EXPECT_FALSE(svm::PreparedSet::on_gpu(X16.data(), y.data(), n, dim, params, scaler, cae::Device::cpu));
  params.kind = svm::SvmKind::one_class;
  EXPECT_FALSE(svm::PreparedSet::on_gpu(X16.data(), y.data(), n, dim, params, scaler, cae::Device::gpu));
}

// svm-fit --cv on the GPU: the same folds, the same per-fold gammas, and a table whose every
// cell is within a few held-out predictions of the CPU's (the solvers stop at the same
// tolerance by different paths, so a row near a boundary may flip).
TEST(SvmGpu, CrossValidationTableMatchesCpu) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1, 2}, {150, 120, 130}, 16, 0.35, 0, 61);
  svm::ClassifierParams params;
  const std::vector<double> C = {1, 10};
  const std::vector<std::string> gamma = {"0.5x", "scale"};
  const svm::ModelSelection cpu = svm::cross_validate(pr.X.data(), pr.y.data(), pr.n, pr.dim, params, C, gamma, 3, 7,
                                                      cae::Device::cpu);
  const svm::ModelSelection gpu = svm::cross_validate(pr.X.data(), pr.y.data(), pr.n, pr.dim, params, C, gamma, 3, 7,
                                                      cae::Device::gpu);
  ASSERT_EQ(gpu.cv_accuracy.size(), cpu.cv_accuracy.size());
  EXPECT_EQ(gpu.gamma_resolved, cpu.gamma_resolved);  // gamma comes from the host's scaling
  for (size_t i = 0; i < cpu.cv_accuracy.size(); ++i) EXPECT_NEAR(gpu.cv_accuracy[i], cpu.cv_accuracy[i], 3.0 / pr.n) << i;
  EXPECT_GT(cpu.best_accuracy(), 0.5);  // the clusters overlap but are far from chance (1/3)
}

// ---- the working-set solver (kernels/svm/cuda/working_set_gpu.cu) ---------------------------

// The selection on the device is the CPU's select_working_set, member for member, on random
// states with every kind of variable (at either bound, free; each side short or long), also
// over several key blocks and with ties.
TEST(SvmWorkingSetGpu, SelectionEqualsTheCpus) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  for (const auto& [n, na, q] : {std::tuple<int, int, int>{6, 3, 2}, {300, 120, 64}, {5000, 2600, 1024},
                                {9000, 100, 1024}, {2100, 2050, 512}, {700, 350, 1024}}) {
    const double Cp = 2.0, Cn = 0.5;
    std::vector<double> alpha(n), G(n), Cs(n);
    std::vector<int8_t> y(n);
    std::uniform_real_distribution<double> u(0, 1);
    for (int t = 0; t < n; ++t) {
      y[t] = t < na ? 1 : -1;
      Cs[t] = t < na ? Cp : Cn;
      const double r = u(rng);
      alpha[t] = r < 0.3 ? 0 : r < 0.6 ? Cs[t] : Cs[t] * u(rng);
      // Coarse values give ties (equal floats), which go to the smaller index.
      G[t] = std::round((u(rng) * 4 - 2) * 64) / 64;
    }
    cae::cuda::DeviceBuffer<double> d_alpha(n), d_G(n);
    ASSERT_EQ(cudaMemcpy(d_alpha.get(), alpha.data(), sizeof(double) * n, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_G.get(), G.data(), sizeof(double) * n, cudaMemcpyHostToDevice), cudaSuccess);
    // Without a kept half, and with the last round's fresh variables kept (in their order).
    std::vector<int> kept;
    for (int t = n - 1; t >= 0 && static_cast<int>(kept.size()) < std::min(q, n) / 2; t -= 3) kept.push_back(t);
    for (const std::vector<int>& k : {std::vector<int>{}, kept}) {
      const auto gpu = gpu_test::select_one_lane(d_alpha.get(), d_G.get(), n, na, Cp, Cn, q, k, nullptr);
      std::vector<int> fresh;
      const auto cpu = svm::cpu::select_working_set(y.data(), G.data(), alpha.data(), Cs.data(), n, q, k, &fresh);
      EXPECT_EQ(gpu.ws, cpu) << "n " << n << " q " << q << " kept " << k.size();
      EXPECT_EQ(gpu.fresh, fresh) << "n " << n << " q " << q << " kept " << k.size();
      for (int t : k) EXPECT_TRUE(std::binary_search(cpu.begin(), cpu.end(), t));
    }
    const auto gpu = gpu_test::select_one_lane(d_alpha.get(), d_G.get(), n, na, Cp, Cn, q, {}, nullptr);
    double up = -INFINITY, low = -INFINITY;
    for (int t = 0; t < n; ++t) {
      const bool pos = t < na, below = alpha[t] < Cs[t], above = alpha[t] > 0;
      const double yG = pos ? G[t] : -G[t];
      if (pos ? below : above) up = std::max(up, -yG);
      if (pos ? above : below) low = std::max(low, yG);
    }
    EXPECT_EQ(gpu.m_up, up);
    EXPECT_EQ(gpu.m_low, low);
  }
}

// Rows to float16 as the host rounds them (nearest, ties to even), overflow flagged; norms of
// the halves in double.
TEST(SvmWorkingSetGpu, HalfRowsAndTheirNormsAreTheHosts) {
  REQUIRE_GPU();
  const int n = 37, dim = 70, ld = 96;
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> X(static_cast<size_t>(n) * ld, 0.f);
  for (int r = 0; r < n; ++r)
    for (int f = 0; f < dim; ++f) X[static_cast<size_t>(r) * ld + f] = normal(rng) * (f % 7 == 0 ? 1e-3f : 1.f);
  cae::cuda::DeviceBuffer<float> d_X(X.size());
  cae::cuda::DeviceBuffer<__half> d_H(X.size());
  cae::cuda::DeviceBuffer<int> d_over(1);
  cae::cuda::DeviceBuffer<double> d_norms(n);
  ASSERT_EQ(cudaMemcpy(d_X.get(), X.data(), sizeof(float) * X.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_over.get(), 0, sizeof(int)), cudaSuccess);
  svm::cuda::rows_to_half(d_X.get(), static_cast<int64_t>(X.size()), d_H.get(), d_over.get(), nullptr);
  svm::cuda::half_row_squared_norms(d_H.get(), n, dim, ld, d_norms.get(), nullptr);
  std::vector<uint16_t> H(X.size());
  std::vector<double> norms(n);
  int over = -1;
  ASSERT_EQ(cudaMemcpy(H.data(), d_H.get(), 2 * H.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(norms.data(), d_norms.get(), sizeof(double) * n, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&over, d_over.get(), sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(over, 0);
  for (size_t i = 0; i < X.size(); ++i) ASSERT_EQ(H[i], cae::float_to_half_bits(X[i])) << i;
  for (int r = 0; r < n; ++r) {
    double s = 0;
    for (int f = 0; f < dim; ++f) {
      const double v = cae::half_bits_to_float(H[static_cast<size_t>(r) * ld + f]);
      s += v * v;
    }
    EXPECT_NEAR(norms[r], s, 1e-12 * s);
  }
  X[5] = 70000.f;
  ASSERT_EQ(cudaMemcpy(d_X.get(), X.data(), sizeof(float) * X.size(), cudaMemcpyHostToDevice), cudaSuccess);
  svm::cuda::rows_to_half(d_X.get(), static_cast<int64_t>(X.size()), d_H.get(), d_over.get(), nullptr);
  ASSERT_EQ(cudaMemcpy(&over, d_over.get(), sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(over, 1);
}

namespace {
// pr with its rows rounded to float16: the problem the float16 working sets solve exactly.
Problem rounded_to_half(Problem pr) {
  for (float& v : pr.X) v = cae::half_bits_to_float(cae::float_to_half_bits(v));
  return pr;
}

svm::cuda::FitOptions working_sets(bool float32 = false, int lanes = 0, int q = 1024, int64_t limit = -1) {
  svm::cuda::FitOptions o;
  o.path = svm::cuda::FitOptions::Path::working_set;
  o.working_set_float32 = float32;
  o.working_set_lanes = lanes;
  o.working_set_size = q;
  o.kernel_bytes_limit = limit;
  return o;
}
}  // namespace

// Working sets against the CPU's whole-matrix model: optimal under the kernel values of the
// rows they compute from (float32, or the float16 rounding), the same predictions, support
// vectors within 2 %; over pairs larger and smaller than the working set, class weights, a
// linear kernel, one lane and many.
TEST(SvmWorkingSetGpu, FitMatchesCpu) {
  REQUIRE_GPU();
  struct WsCase {
    Case c;
    int lanes, q;
    svm::ClassWeights weights;
  };
  const std::vector<WsCase> cases = {
      {{"ws 4 classes", {0, 1, 2, 3}, {400, 650, 500, 550}, 24, 0.3, 10.0, svm::KernelType::rbf}, 0, 1024, {}},
      {{"ws pair > q", {0, 1}, {2600, 2400}, 32, 0.2, 10.0, svm::KernelType::rbf}, 0, 256, {}},
      {{"ws one lane", {0, 1, 2}, {900, 700, 800}, 20, 0.3, 1.0, svm::KernelType::rbf}, 1, 128, {}},
      {{"ws weights", {0, 1, 2}, {300, 200, 400}, 16, 0.5, 1.0, svm::KernelType::rbf}, 2, 64, {{0, 4.0}, {2, 0.25}}},
      {{"ws linear", {0, 1, 2}, {300, 250, 200}, 20, 0.3, 0.5, svm::KernelType::linear}, 0, 128, {}},
  };
  uint32_t seed = 61;
  for (const WsCase& wc : cases) {
    SCOPED_TRACE(wc.c.name);
    const Problem pr = make_problem(wc.c.labels, wc.c.sizes, wc.c.dim, wc.c.spread, 1500, seed++);
    svm::FitParams p = params(wc.c.C, pr.gamma, wc.c.kernel);
    p.class_weight = wc.weights;
    const svm::Model cpu = svm::fit_cpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr);
    const std::vector<double> dec_cpu = decisions(cpu, pr.X_test, pr.n_test, false);
    for (bool float32 : {false, true}) {
      svm::cuda::FitStats stats;
      const svm::Model gpu = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr,
                                            working_sets(float32, wc.lanes, wc.q), &stats);
      EXPECT_EQ(stats.mode, "working-set");
      EXPECT_EQ(stats.working_set_half, !float32);
      EXPECT_EQ(stats.pairs_hit_limit, 0);
      EXPECT_LE(std::abs(gpu.n_sv() - cpu.n_sv()), std::max<int64_t>(2, cpu.n_sv() / 50))
          << "float32 " << float32 << ": gpu " << gpu.n_sv() << ", cpu " << cpu.n_sv();
      const std::vector<double> dec_gpu = decisions(gpu, pr.X_test, pr.n_test, true);
      const double agree = agreement(svm::vote(gpu, dec_gpu.data(), pr.n_test), svm::vote(cpu, dec_cpu.data(), pr.n_test));
      EXPECT_GE(agree, 0.99) << "float32 " << float32;
      expect_pairs_optimal(gpu, float32 ? pr : rounded_to_half(pr), wc.c.C, 10 * p.tol, wc.weights);
      std::printf("[ %-14s] %s rows: sv gpu %lld cpu %lld, agreement %.4f, %s\n", wc.c.name,
                  float32 ? "float32" : "float16", static_cast<long long>(gpu.n_sv()),
                  static_cast<long long>(cpu.n_sv()), agree, stats.detail.c_str());
    }
  }
}

// A start other than alpha = 0 (WorkingSetPair::start): from the solution of a subset of the
// rows (feasible for the whole: the other multipliers 0), the solver reaches the cold start's
// optimum — optimal under the CPU's kernel values of the float16 rows, the same objective to
// the tolerance — and from the optimum itself it stops at once.
TEST(SvmWorkingSetGpu, AStartOtherThanZeroReachesTheSameOptimum) {
  REQUIRE_GPU();
  const int na = 1400, nb = 1200, n = na + nb, dim = 24;
  const double C = 10.0;
  const Problem pr = rounded_to_half(make_problem({0, 1}, {na, nb}, dim, 0.3, 10, 81));
  // Class 0 first (+1), then class 1 (−1): the layout of a pair in class-sorted rows.
  std::vector<float> rows;
  std::vector<int8_t> y;
  for (int want : {0, 1})
    for (int64_t r = 0; r < pr.n; ++r)
      if (pr.y[r] == want) {
        rows.insert(rows.end(), pr.X.begin() + r * dim, pr.X.begin() + (r + 1) * dim);
        y.push_back(want == 0 ? 1 : -1);
      }
  const int64_t ld = svm::cuda::device_row_stride(dim);
  std::vector<float> padded(static_cast<size_t>(n * ld), 0.0f);
  for (int r = 0; r < n; ++r) std::copy_n(rows.begin() + int64_t{r} * dim, dim, padded.begin() + r * ld);
  cae::cuda::DeviceBuffer<float> d_X(padded.size());
  cae::cuda::DeviceBuffer<__half> d_H(padded.size());
  cae::cuda::DeviceBuffer<double> d_norms(n);
  cae::cuda::DeviceBuffer<int> d_over(1);
  ASSERT_EQ(cudaMemcpy(d_X.get(), padded.data(), padded.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(d_over.get(), 0, sizeof(int)), cudaSuccess);
  svm::cuda::rows_to_half(d_X.get(), static_cast<int64_t>(padded.size()), d_H.get(), d_over.get(), nullptr);
  svm::cuda::half_row_squared_norms(d_H.get(), n, dim, ld, d_norms.get(), nullptr);
  svm::cuda::WorkingSetRows ws_rows;
  ws_rows.X16 = d_H.get();
  ws_rows.ld = ld;
  ws_rows.norms = d_norms.get();
  svm::cuda::WorkingSetConfig config;
  config.working_set_size = 256;
  config.tol = 1e-3;
  config.gamma = pr.gamma;
  config.budget_bytes = int64_t{1} << 30;
  cublasHandle_t blas = nullptr;
  ASSERT_EQ(cae::cublas::api().create(&blas), CUBLAS_STATUS_SUCCESS);
  auto solve = [&](int n_a, int n_b, const double* start, int64_t* rounds) {
    svm::cuda::WorkingSetPair pair;
    pair.start_b = na;  // class 1's rows start after all of class 0's
    pair.na = n_a;
    pair.nb = n_b;
    pair.Cp = pair.Cn = C;
    pair.start = start;
    const auto out = svm::cuda::solve_working_sets(blas, ws_rows, {pair}, config, nullptr, {}, nullptr);
    if (rounds) *rounds = out[0].rounds;
    return out[0];
  };
  int64_t cold_rounds = 0, warm_rounds = 0, again_rounds = 0;
  const auto cold = solve(na, nb, nullptr, &cold_rounds);
  // The subset: the first half of either class.
  const auto part = solve(na / 2, nb / 2, nullptr, nullptr);
  std::vector<double> start(static_cast<size_t>(n), 0.0);
  for (int t = 0; t < na / 2; ++t) start[t] = part.alpha[t];
  for (int t = 0; t < nb / 2; ++t) start[na + t] = part.alpha[na / 2 + t];
  const auto warm = solve(na, nb, start.data(), &warm_rounds);
  const auto again = solve(na, nb, cold.alpha.data(), &again_rounds);
  cae::cublas::api().destroy(blas);

  auto K = svm_test::DenseKernelRows::by_cpu_blocks(svm::cpu::KernelSpec{svm::KernelType::rbf, pr.gamma}, rows.data(),
                                                   n, dim);
  EXPECT_LT(svm::cpu::kkt_gap(K, y.data(), n, C, cold.alpha), 10 * config.tol);
  EXPECT_LT(svm::cpu::kkt_gap(K, y.data(), n, C, warm.alpha), 10 * config.tol);
  EXPECT_NEAR(warm.result.objective, cold.result.objective, 1e-3 * std::fabs(cold.result.objective));
  EXPECT_NEAR(warm.result.rho, cold.result.rho, 1e-2 * std::max(1.0, std::fabs(cold.result.rho)));
  // From the optimum: at most a round (its gradient, summed afresh, may see the gap just above tol).
  EXPECT_LE(again_rounds, 1);
  EXPECT_NEAR(again.result.objective, cold.result.objective, 1e-4 * std::fabs(cold.result.objective));
  std::printf("rounds: cold %lld, from the half's solution %lld, from the optimum %lld\n",
              static_cast<long long>(cold_rounds), static_cast<long long>(warm_rounds),
              static_cast<long long>(again_rounds));
}

// Random rows on the device, ld = device_row_stride(dim) apart, with their norms as the
// working sets take them: rounded to float16 (the rows on the host as float, rounded too),
// or kept in float32 as the fit keeps rows float16 cannot hold.
struct RowsOnDevice {
  std::vector<float> host;  // [n, dim], each value as the device holds it
  cae::cuda::DeviceBuffer<float> X32;
  cae::cuda::DeviceBuffer<__half> X16;
  cae::cuda::DeviceBuffer<double> norms;
  svm::cuda::WorkingSetRows view;
};
enum class RowType { float16, float32 };
void upload_rows(const std::vector<float>& X, int n, int dim, RowsOnDevice& out, RowType type = RowType::float16) {
  const int64_t ld = svm::cuda::device_row_stride(dim);
  std::vector<float> padded(static_cast<size_t>(n * ld), 0.0f);
  for (int r = 0; r < n; ++r) std::copy_n(X.begin() + int64_t{r} * dim, dim, padded.begin() + r * ld);
  out.X32.resize(padded.size());
  out.norms.resize(static_cast<size_t>(n));
  ASSERT_EQ(cudaMemcpy(out.X32.get(), padded.data(), padded.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  out.host = X;
  out.view.ld = ld;
  out.view.norms = out.norms.get();
  if (type == RowType::float32) {
    svm::cuda::row_squared_norms(out.X32.get(), n, dim, ld, out.norms.get(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    out.view.X32 = out.X32.get();
    return;
  }
  cae::cuda::DeviceBuffer<int> d_over(1);
  out.X16.resize(padded.size());
  ASSERT_EQ(cudaMemset(d_over.get(), 0, sizeof(int)), cudaSuccess);
  svm::cuda::rows_to_half(out.X32.get(), static_cast<int64_t>(padded.size()), out.X16.get(), d_over.get(), nullptr);
  svm::cuda::half_row_squared_norms(out.X16.get(), n, dim, ld, out.norms.get(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.X32.release();
  for (float& v : out.host) v = cae::half_bits_to_float(cae::float_to_half_bits(v));
  out.view.X16 = out.X16.get();
}

// K(a, b) of float16 rows with every sum in double: the float64 gradient's definition.
double kernel_in_double(const float* a, const float* b, int dim, bool rbf, double gamma) {
  double dot = 0, aa = 0, bb = 0;
  for (int f = 0; f < dim; ++f) {
    dot += double{a[f]} * b[f];
    aa += double{a[f]} * a[f];
    bb += double{b[f]} * b[f];
  }
  return rbf ? std::exp(-gamma * std::max(aa + bb - 2 * dot, 0.0)) : dot;
}

// add_float64_kernel_sums against its definition, summed in double on the host, for a pair
// laid out inside more rows, columns that include some of the pair's own rows, and scratch
// for blocks of 128 rows and columns (so several of each). Float32 rows are widened: the
// sums are float64's. Float16 rows go through int8 slices: within the slices' bound
// (working_set_gpu.cuh), for rows whose values lie within 2⁴ of each other and for rows
// where every seventh is 2⁻²⁰ of the rest (below what the slices hold exactly).
TEST(SvmWorkingSetGpu, Float64KernelSumsEqualTheirDefinition) {
  REQUIRE_GPU();
  const int total = 1100, dim = 37, na = 410, nb = 330, count = 300;
  const int64_t start_a = 60, start_b = 700;
  const int n = na + nb;
  auto row_of = [&](int t) { return t < na ? start_a + t : start_b + (t - na); };
  struct Case {
    RowType type;
    bool tiny;
  };
  for (const Case c : {Case{RowType::float16, false}, Case{RowType::float16, true}, Case{RowType::float32, false}}) {
    const RowType type = c.type;
    const bool tiny = c.tiny;
    const std::string what = std::string(type == RowType::float16 ? "float16" : "float32") +
                             (tiny ? " rows with tiny values" : " rows");
    std::mt19937 rng(97);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> X(static_cast<size_t>(total) * dim);
    for (size_t i = 0; i < X.size(); ++i) {
      // Values in [1/4, 4) in magnitude (within 2⁴ of each other), or every seventh 2⁻²⁰ of that.
      const float v = normal(rng);
      X[i] = std::copysign(std::clamp(std::fabs(v), 0.25f, 3.99f), v) * (tiny && i % 7 == 3 ? 0x1p-20f : 1.0f);
    }
    RowsOnDevice rows;
    upload_rows(X, total, dim, rows, type);
    svm::cuda::WorkingSetPair pair;
    pair.start_a = start_a;
    pair.start_b = start_b;
    pair.na = na;
    pair.nb = nb;
    // Columns: the pair's variables 0, 3, 6, ... (so each is some row t's own), then others.
    std::vector<int64_t> cols;
    std::vector<int> self;
    std::vector<double> coef;
    std::uniform_real_distribution<double> uniform(-10.0, 10.0);
    for (int j = 0; j < count; ++j) {
      const int t = j < 200 ? 3 * j : -1;
      cols.push_back(t >= 0 ? row_of(t) : (j * 7) % 50);  // rows 0..49: in no class of the pair
      self.push_back(t);
      coef.push_back(uniform(rng));
    }
    cae::cuda::DeviceBuffer<int64_t> d_cols(cols.size());
    cae::cuda::DeviceBuffer<int> d_self(self.size());
    cae::cuda::DeviceBuffer<double> d_coef(coef.size()), d_G(static_cast<size_t>(n));
    ASSERT_EQ(cudaMemcpy(d_cols.get(), cols.data(), cols.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_self.get(), self.data(), self.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d_coef.get(), coef.data(), coef.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
    const int64_t scratch_bytes = svm::cuda::float64_gradient_scratch_bytes(rows.view, 128);
    cae::cuda::DeviceBuffer<unsigned char> scratch(static_cast<size_t>(scratch_bytes));
    cublasHandle_t blas = nullptr;
    ASSERT_EQ(cae::cublas::api().create(&blas), CUBLAS_STATUS_SUCCESS);
    const double gamma = 1.0 / dim;
    // The slices' bound on a dot product's error (0 where a row holds no value they round).
    auto largest = [&](const float* x) {
      double m = 0;
      for (int f = 0; f < dim; ++f) m = std::max(m, std::fabs(double{x[f]}));
      return m;
    };
    auto l1 = [&](const float* x) {
      double s = 0;
      for (int f = 0; f < dim; ++f) s += std::fabs(double{x[f]});
      return s;
    };
    auto dot_bound = [&](const float* a, const float* b) {
      if (type == RowType::float32) return 0.0;
      return 0x1p-26 * (largest(b) * l1(a) + largest(a) * l1(b)) + 0x1p-31 * dim * largest(a) * largest(b);
    };
    for (const bool rbf : {true, false}) {
      std::vector<double> start(static_cast<size_t>(n));
      for (int t = 0; t < n; ++t) start[t] = -1.0 + 0.001 * t;
      ASSERT_EQ(cudaMemcpy(d_G.get(), start.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
      svm::cuda::add_float64_kernel_sums(blas, rows.view, pair, d_cols.get(), d_self.get(), d_coef.get(), count,
                                         rbf ? svm::KernelType::rbf : svm::KernelType::linear, gamma, scratch.get(),
                                         scratch_bytes, d_G.get(), nullptr);
      std::vector<double> G(static_cast<size_t>(n));
      ASSERT_EQ(cudaMemcpy(G.data(), d_G.get(), n * 8, cudaMemcpyDeviceToHost), cudaSuccess);
      double worst = 0, worst_err = 0, worst_bound = 0;
      for (int t = 0; t < n; ++t) {
        const float* xt = rows.host.data() + row_of(t) * dim;
        double sum = 0, bound = 0;
        for (int j = 0; j < count; ++j) {
          const float* xs = rows.host.data() + cols[j] * dim;
          const bool own = self[j] == t;
          const double k = own && rbf ? 1.0 : kernel_in_double(xs, xt, dim, rbf, gamma);
          sum += coef[j] * k;
          // An RBF value moves by at most 2γ·k·(its dot's error) to first order (the error is ≲ 1e-6).
          if (!own) bound += std::fabs(coef[j]) * (rbf ? 2.01 * gamma * k : 1.0) * dot_bound(xs, xt);
        }
        const double want = start[t] + (t < na ? sum : -sum);
        const double err = std::fabs(G[t] - want) / std::max(1.0, std::fabs(want));
        worst = std::max(worst, err - bound / std::max(1.0, std::fabs(want)));
        worst_err = std::max(worst_err, err);
        worst_bound = std::max(worst_bound, bound / std::max(1.0, std::fabs(want)));
      }
      EXPECT_LT(worst, 1e-11) << what << (rbf ? ", rbf" : ", linear");
      std::printf("%s, %s: relative error at most %.3g, bound at most %.3g\n", what.c_str(), rbf ? "rbf" : "linear",
                  worst_err, worst_bound);
    }
    cae::cublas::api().destroy(blas);
  }
}

// The stopping test in float64: a pair solved by working sets has a KKT gap below tol when
// its gradient is summed afresh in double from the float16 rows (not only under float32
// kernel values), and it took that gradient at least once.
TEST(SvmWorkingSetGpu, StopsAtTheToleranceUnderFloat64Sums) {
  REQUIRE_GPU();
  const int na = 1500, nb = 1300, n = na + nb, dim = 48;
  const double C = 10.0;
  const Problem pr = make_problem({0, 1}, {na, nb}, dim, 0.3, 10, 83);
  std::vector<float> sorted;
  std::vector<int8_t> y;
  for (int want : {0, 1})
    for (int64_t r = 0; r < pr.n; ++r)
      if (pr.y[r] == want) {
        sorted.insert(sorted.end(), pr.X.begin() + r * dim, pr.X.begin() + (r + 1) * dim);
        y.push_back(want == 0 ? 1 : -1);
      }
  RowsOnDevice rows;
  upload_rows(sorted, n, dim, rows);
  svm::cuda::WorkingSetConfig config;
  config.working_set_size = 256;
  config.tol = 1e-3;
  config.gamma = pr.gamma;
  config.budget_bytes = int64_t{1} << 30;
  svm::cuda::WorkingSetPair pair;
  pair.start_b = na;
  pair.na = na;
  pair.nb = nb;
  pair.Cp = pair.Cn = C;
  cublasHandle_t blas = nullptr;
  ASSERT_EQ(cae::cublas::api().create(&blas), CUBLAS_STATUS_SUCCESS);
  const auto out = svm::cuda::solve_working_sets(blas, rows.view, {pair}, config, nullptr, {}, nullptr);
  cae::cublas::api().destroy(blas);
  const std::vector<double>& alpha = out[0].alpha;
  double up = -1e300, low = 1e300;  // m(a), M(a) of smo.cpp
  for (int t = 0; t < n; ++t) {
    double G = -1;
    for (int s = 0; s < n; ++s)
      if (alpha[s] != 0)
        G += y[t] * y[s] * alpha[s] *
             (s == t ? 1.0 : kernel_in_double(rows.host.data() + int64_t{s} * dim, rows.host.data() + int64_t{t} * dim,
                                              dim, true, pr.gamma));
    const double v = -y[t] * G;
    const bool in_up = y[t] > 0 ? alpha[t] < C : alpha[t] > 0, in_low = y[t] > 0 ? alpha[t] > 0 : alpha[t] < C;
    if (in_up) up = std::max(up, v);
    if (in_low) low = std::min(low, v);
  }
  EXPECT_LT(up - low, config.tol);
  EXPECT_GE(out[0].refreshes, 1);
  EXPECT_LE(out[0].refreshes, svm::cuda::kMaxFloat64Refreshes);
  EXPECT_FALSE(out[0].result.hit_iteration_limit);
  std::printf("float64 gap %.3g after %lld rounds, %d float64 gradients over %lld changes\n", up - low,
              static_cast<long long>(out[0].rounds), out[0].refreshes,
              static_cast<long long>(out[0].refreshed_columns));
}

// A cache of only the working set's rows (every round recomputes what it chose) against one
// that holds every row: the same optimum, and fewer rows computed with the larger cache.
TEST(SvmWorkingSetGpu, ACacheOfOnlyTheWorkingSetGivesTheSameModel) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1}, {3000, 2800}, 24, 0.25, 1000, 71);
  const svm::FitParams p = params(10.0, pr.gamma);
  svm::cuda::FitStats small_stats, large_stats;
  svm::cuda::FitOptions only_the_set = working_sets(false, 1, 256);
  only_the_set.working_set_cache_rows = 256;
  const svm::Model small =
      svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, only_the_set, &small_stats);
  const svm::Model large =
      svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, working_sets(false, 1, 256), &large_stats);
  EXPECT_GT(small_stats.working_set_rows, large_stats.working_set_rows);
  EXPECT_LE(large_stats.working_set_rows, pr.n);
  EXPECT_LE(std::abs(small.n_sv() - large.n_sv()), std::max<int64_t>(2, large.n_sv() / 100));
  const std::vector<double> a = decisions(small, pr.X_test, pr.n_test, true), b = decisions(large, pr.X_test, pr.n_test, true);
  EXPECT_GE(agreement(svm::vote(small, a.data(), pr.n_test), svm::vote(large, b.data(), pr.n_test)), 0.995);
  expect_pairs_optimal(small, rounded_to_half(pr), 10.0, 10 * p.tol);
  std::printf("cache of the working set: %s\nwhole cache: %s\n", small_stats.detail.c_str(), large_stats.detail.c_str());
}

// Automatic: the whole matrix where it fits, else working sets (nothing refused); both the
// same model.
TEST(SvmWorkingSetGpu, AutomaticChoosesWorkingSetsWhenTheMatrixDoesNotFit) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1, 2, 3}, {1400, 1600, 1500, 1500}, 30, 0.3, 800, 73);
  const svm::FitParams p = params(10.0, pr.gamma);
  svm::cuda::FitStats whole_stats, ws_stats;
  const svm::Model whole = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, {}, &whole_stats);
  svm::cuda::FitOptions tight;
  tight.kernel_bytes_limit = 64 << 20;  // the whole matrix is 144 MB; a lane of 1,024 x 3,000 ~30 MB
  const svm::Model ws = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, tight, &ws_stats);
  EXPECT_EQ(whole_stats.mode, "whole-matrix");
  EXPECT_EQ(ws_stats.mode, "working-set");
  const std::vector<double> a = decisions(whole, pr.X_test, pr.n_test, true), b = decisions(ws, pr.X_test, pr.n_test, true);
  EXPECT_GE(agreement(svm::vote(whole, a.data(), pr.n_test), svm::vote(ws, b.data(), pr.n_test)), 0.99);
  EXPECT_LE(std::abs(whole.n_sv() - ws.n_sv()), std::max<int64_t>(2, whole.n_sv() / 50));
}

// svm-fit --cache-mb on the GPU (FitParams::gpu_cache_mb) bounds the kernel values held: a
// matrix larger than it goes to working sets, whose lanes' cached rows stay within it, and
// never below one working set's rows; the optimum is the unbounded fit's.
TEST(SvmWorkingSetGpu, CacheMbBoundsTheKernelValuesHeld) {
  REQUIRE_GPU();
  const Problem pr = make_problem({0, 1, 2, 3}, {1400, 1600, 1500, 1500}, 30, 0.3, 800, 79);
  const int64_t pair_rows = 1600 + 1500;  // the largest pair's
  svm::FitParams p = params(10.0, pr.gamma);
  svm::cuda::FitStats free_stats;
  const svm::Model unbounded = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, {}, &free_stats);
  EXPECT_EQ(free_stats.mode, "whole-matrix");  // 144 MB, well within the device
  for (const int64_t mb : {int64_t{64}, int64_t{1}}) {
    SCOPED_TRACE("--cache-mb " + std::to_string(mb));
    p.gpu_cache_mb = mb;
    svm::cuda::FitStats st;
    const svm::Model bounded = svm::cuda::fit(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, nullptr, {}, &st);
    EXPECT_EQ(st.mode, "working-set");
    ASSERT_GE(st.working_set_lanes, 1);
    const int64_t held = st.working_set_lanes * st.working_set_cache_rows * pair_rows * 4;
    const int64_t one_set = 1024 * pair_rows * 4;
    EXPECT_LE(held, std::max((mb << 20) + st.working_set_lanes * 256, st.working_set_lanes * (one_set + 256)));
    EXPECT_GE(st.working_set_cache_rows, 1024);
    if (mb == 1) EXPECT_EQ(st.working_set_lanes, 1);
    expect_pairs_optimal(bounded, rounded_to_half(pr), 10.0, 10 * p.tol);
    const std::vector<double> a = decisions(unbounded, pr.X_test, pr.n_test, true),
                              b = decisions(bounded, pr.X_test, pr.n_test, true);
    EXPECT_GE(agreement(svm::vote(unbounded, a.data(), pr.n_test), svm::vote(bounded, b.data(), pr.n_test)), 0.99);
    std::printf("--cache-mb %lld: %s\n", static_cast<long long>(mb), st.detail.c_str());
  }
}

TEST(SvmGpu, RejectsBadInput) {
  const Problem pr = make_problem({0, 1}, {20, 20}, 4, 1.0, 0, 41);
  EXPECT_THROW(svm::fit_gpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, params(1.0, 0.0), nullptr), std::invalid_argument);
  EXPECT_THROW(svm::fit_gpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, params(0.0, 1.0), nullptr), std::invalid_argument);
  std::vector<int32_t> one_class(pr.y.size(), 3);
  EXPECT_THROW(svm::fit_gpu(pr.X.data(), one_class.data(), pr.n, pr.dim, params(1.0, 1.0), nullptr),
               std::invalid_argument);
  svm::Model broken;
  broken.classes = {0, 1};
  broken.n_support = {1, 1};
  broken.dim = 4;
  broken.rho = {0.0};
  double dec = 0;
  EXPECT_THROW(svm::decision_values_gpu(broken, pr.X.data(), 1, &dec), std::invalid_argument);
}

}  // namespace
