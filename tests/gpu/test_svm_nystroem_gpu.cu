// The Nyström features on the GPU (kernels/svm/cuda/nystroem_gpu.cu) against their CPU twins
// (kernels/svm/approx/nystroem.cpp) on random rows: the projection (K_LL's pseudo-inverse
// P Pᵀ, which the eigenvectors' signs do not change, and the kept eigenvalues), the normal
// equations' solution on host rows and on rows prepared on the device (the least-squares
// optimality conditions under the CPU's features, and the CPU's weights), and the decision
// values with dropped features. Skipped, with a message, where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "common/device.h"
#include "kernels/svm/approx/nystroem.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/cuda/svm_gpu.cuh"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/svm_problems.h"

namespace {

using svm_test::make_problem;
using svm_test::Problem;

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// P Pᵀ [M, M] = K_LL⁺ on the kept eigenvalues: the same for either sign of each eigenvector.
std::vector<double> pseudo_inverse(const svm::NystroemModel& m) {
  const size_t M = static_cast<size_t>(m.M), r = static_cast<size_t>(m.rank);
  const std::vector<double>& P = *m.projection;
  std::vector<double> out(M * M, 0.0);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < M; ++j) {
      double s = 0;
      for (size_t c = 0; c < r; ++c) s += P[i * r + c] * P[j * r + c];
      out[i * M + j] = s;
    }
  return out;
}

svm::NystroemModel map_on(const Problem& p, int64_t M, double gamma, cae::Device device) {
  svm::ApproxSpec spec;
  spec.landmarks = M;
  spec.seed = 7;
  if (device == cae::Device::cpu) return svm::nystroem_map(p.X.data(), p.n, p.dim, gamma, spec);
  std::vector<int64_t> indices = svm::draw_landmarks(p.n, M, spec.seed);
  cae::LargeVector<float> landmarks(indices.size() * static_cast<size_t>(p.dim));
  for (size_t l = 0; l < indices.size(); ++l)
    std::copy_n(p.X.data() + indices[l] * p.dim, p.dim, landmarks.data() + l * static_cast<size_t>(p.dim));
  svm::NystroemModel m = svm::nystroem_landmarks(std::move(landmarks), std::move(indices), p.dim, gamma, spec.seed);
  svm::nystroem_projection_gpu(m);
  return m;
}

TEST(SvmNystroemGpu, ProjectionMatchesCpu) {
  REQUIRE_GPU();
  // The rows lie far apart in γ's units, so K_LL is well conditioned and the float kernel
  // values' ulp-level differences between the two BLAS stay ulp-level in K_LL⁺. Two landmarks
  // made equal make it singular: the floor drops that direction on both devices. M 300:
  // dsyevd's divide and conquer splits a matrix this large.
  for (const int64_t M : {37, 300}) {
    Problem p = make_problem(400, 9, 3, 11);
    const std::vector<int64_t> drawn = svm::draw_landmarks(p.n, M, 7);
    std::copy_n(p.X.data() + drawn[0] * p.dim, p.dim, p.X.data() + drawn[1] * p.dim);
    const svm::NystroemModel cpu = map_on(p, M, 0.2, cae::Device::cpu);
    const svm::NystroemModel gpu = map_on(p, M, 0.2, cae::Device::gpu);
    EXPECT_LT(cpu.rank, M);
    ASSERT_EQ(gpu.rank, cpu.rank) << "M " << M;
    ASSERT_EQ(gpu.landmark_indices, cpu.landmark_indices);
    for (int c = 0; c < cpu.rank; ++c)
      EXPECT_NEAR(gpu.eigenvalues[c], cpu.eigenvalues[c], 1e-6 * cpu.eigenvalues[0]) << "M " << M << " eigenvalue " << c;
    const std::vector<double> a = pseudo_inverse(cpu), b = pseudo_inverse(gpu);
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
    std::printf("M %lld: rank %d, |P P^T| %.3g, worst difference %.3g\n", static_cast<long long>(M), cpu.rank,
                max_abs(a), worst);
    EXPECT_LT(worst, 1e-5 * max_abs(a)) << "M " << M;
  }
}

// The GPU's weights meet the ridge problem's optimality conditions under the CPU's features
// φ = K(x, L)·P of the same map, and equal the CPU's weights up to rounding.
void expect_cpu_solution(const svm::NystroemModel& m, const Problem& p, const svm::ClassWeights& weights,
                         const std::vector<double>& Cs, const std::vector<svm::NystroemWeights>& gpu) {
  const std::vector<int> classes{0, 1, 2};
  const std::vector<svm::NystroemWeights> cpu =
      svm::fit_nystroem_classifiers(m, p.X.data(), p.y.data(), p.n, classes, weights, Cs, "rows");
  const int r = m.rank;
  std::vector<double> phi(static_cast<size_t>(p.n) * r);
  svm::nystroem_features(m, p.X.data(), p.n, nullptr, phi.data());
  ASSERT_EQ(gpu.size(), Cs.size());
  for (size_t ci = 0; ci < Cs.size(); ++ci) {
    const svm::NystroemWeights& w = gpu[ci];
    const double wmax = max_abs(cpu[ci].weights);
    double worst = 0;
    for (size_t j = 0; j < w.weights.size(); ++j) worst = std::max(worst, std::fabs(w.weights[j] - cpu[ci].weights[j]));
    std::printf("C %g: |w| %.3g, worst difference from the CPU's %.3g\n", Cs[ci], wmax, worst);
    EXPECT_LT(worst, 1e-5 * wmax) << "C " << Cs[ci];
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(w.bias[c], cpu[ci].bias[c], 1e-5 * (1 + std::fabs(cpu[ci].bias[c])));
      std::vector<double> grad(static_cast<size_t>(r), 0.0), scale(static_cast<size_t>(r), 0.0);
      double grad_b = 0, scale_b = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const double s = svm::class_weight(weights, p.y[i]);
        const double t = p.y[i] == c ? 1.0 : -1.0;
        const double* f = phi.data() + i * r;
        double e = w.bias[c] - t;
        for (int j = 0; j < r; ++j) e += w.weights[c * r + j] * f[j];
        for (int j = 0; j < r; ++j) {
          grad[j] += s * e * f[j];
          scale[j] += s * std::fabs(f[j]);
        }
        grad_b += s * e;
        scale_b += s;
      }
      for (int j = 0; j < r; ++j) {
        grad[j] += w.weights[c * r + j] / Cs[ci];
        EXPECT_LT(std::fabs(grad[j]), 1e-6 * (1 + scale[j])) << "class " << c << " weight " << j;
      }
      EXPECT_LT(std::fabs(grad_b), 1e-6 * scale_b) << "class " << c << " bias";
    }
  }
}

TEST(SvmNystroemGpu, FitOnHostRowsMatchesCpuAndIsOptimal) {
  REQUIRE_GPU();
  Problem p = make_problem(1500, 7, 3, 21);
  const svm::NystroemModel m = map_on(p, 60, 0.3, cae::Device::cpu);
  const svm::ClassWeights weights{{0, 2.0}, {2, 0.5}};
  const std::vector<double> Cs{0.5, 8.0};
  const std::vector<svm::NystroemWeights> gpu = svm::fit_nystroem_classifiers_gpu(
      m, p.X.data(), nullptr, p.y.data(), p.n, {0, 1, 2}, weights, Cs, "rows");
  expect_cpu_solution(m, p, weights, Cs, gpu);
}

TEST(SvmNystroemGpu, FitOnDeviceRowsMatchesCpuAndIsOptimal) {
  REQUIRE_GPU();
  // Rows prepared on the device are in class order; the rows' weights must follow them.
  Problem p = make_problem(1200, 6, 3, 23);
  const svm::Scaler identity = svm::identity_scaler(p.dim);
  svm::PreparedRows prepared;
  const std::shared_ptr<svm::DeviceRows> rows =
      svm::prepare_training_rows_gpu(p.X.data(), p.y.data(), p.n, p.dim, identity, prepared);
  ASSERT_TRUE(rows);
  ASSERT_EQ(prepared.kept, p.dim);
  const svm::NystroemModel m = map_on(p, 50, 0.25, cae::Device::cpu);
  const svm::ClassWeights weights{{1, 3.0}};
  const std::vector<double> Cs{2.0};
  const std::vector<svm::NystroemWeights> gpu = svm::fit_nystroem_classifiers_gpu(
      m, nullptr, rows.get(), p.y.data(), p.n, {0, 1, 2}, weights, Cs, "rows");
  expect_cpu_solution(m, p, weights, Cs, gpu);
}

TEST(SvmNystroemGpu, ClassifierOnGpuPredictsAsOnCpuWithDroppedFeatures) {
  REQUIRE_GPU();
  // Feature 4 is constant in training (dropped) and not in the queries: every kernel value of a
  // query carries exp(−γ e), on both devices.
  Problem p = make_problem(900, 5, 3, 31);
  const int64_t n_train = 700, n_test = p.n - n_train;
  for (int64_t i = 0; i < n_train; ++i) p.X[static_cast<size_t>(i * p.dim + 4)] = 1.5f;
  svm::ClassifierParams params;
  params.log_summary = false;
  params.approx.landmarks = 120;
  params.approx.seed = 5;
  params.C = 4;
  auto fitted = [&](cae::Device device) {
    std::vector<float> X(p.X.begin(), p.X.begin() + n_train * p.dim);
    svm::Classifier clf;
    clf.fit(X.data(), p.y.data(), n_train, p.dim, params, device);
    return clf;
  };
  const svm::Classifier cpu = fitted(cae::Device::cpu), gpu = fitted(cae::Device::gpu);
  ASSERT_TRUE(gpu.is_approx());
  EXPECT_EQ(gpu.n_features_kept(), p.dim - 1);
  EXPECT_EQ(gpu.file().approx.rank, cpu.file().approx.rank);
  auto decisions = [&](const svm::Classifier& clf, cae::Device device) {
    std::vector<float> q(p.X.begin() + n_train * p.dim, p.X.end());
    return clf.decision_values(q.data(), n_test, device);
  };
  const std::vector<double> reference = decisions(cpu, cae::Device::cpu);
  const double scale = max_abs(reference);
  ASSERT_GT(scale, 0.1);
  for (const auto& [clf, device] : {std::pair{&cpu, cae::Device::gpu}, std::pair{&gpu, cae::Device::cpu},
                                    std::pair{&gpu, cae::Device::gpu}}) {
    const std::vector<double> d = decisions(*clf, device);
    ASSERT_EQ(d.size(), reference.size());
    double worst = 0;
    for (size_t i = 0; i < d.size(); ++i) worst = std::max(worst, std::fabs(d[i] - reference[i]));
    std::printf("%s model on %s: |dec| %.3g, worst difference %.3g\n", clf == &cpu ? "cpu" : "gpu",
                cae::device_name(device), scale, worst);
    EXPECT_LT(worst, 1e-5 * scale) << (clf == &cpu ? "cpu" : "gpu") << " model on " << cae::device_name(device);
  }
}

}  // namespace
