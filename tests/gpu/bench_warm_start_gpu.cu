// Warm starts across views, measured (not a test: DISABLED_, run by bench/svm_warm_start.sh):
// one class pair of real features with several views of every image (ae-encode --flip
// --shifts), solved by the working sets cold (alpha 0) and from the one-view problem's
// solution — its multipliers on the first view's rows ("first"), or each spread evenly over
// the image's views ("spread") — the one-view solve counted in the warm time. Prints lines
// "BENCH warm ...": seconds, rounds, kernel rows, objective and support vectors of each.
// Bench-only settings (environment; production code reads none):
//   SVM_WARM_FEATURES (an ae-features file)  SVM_WARM_VIEWS (flip,shift:4)
//   SVM_WARM_PAIR (3,5: cat and dog, CIFAR-10's hardest pair)  SVM_WARM_C (10)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cublas_runtime.h"
#include "common/cuda_check.cuh"
#include "common/view_set.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/cuda/working_set_gpu.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace {

std::string env_or(const char* name, const char* def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}

struct Outcome {
  double seconds = 0, objective = 0;
  int64_t rounds = 0, rows = 0, sv = 0;
};

}  // namespace

TEST(BenchWarmStartGpu, DISABLED_AcrossViews) {
  REQUIRE_GPU();
  const std::string path = env_or("SVM_WARM_FEATURES", "");
  ASSERT_FALSE(path.empty()) << "SVM_WARM_FEATURES names no features file";
  const cae::ViewSet views = cae::ViewSet::parse(env_or("SVM_WARM_VIEWS", "flip,shift:4"));
  const std::string pair_spec = env_or("SVM_WARM_PAIR", "3,5");
  const int class_a = std::atoi(pair_spec.c_str()), class_b = std::atoi(pair_spec.c_str() + pair_spec.find(',') + 1);
  const double C = std::atof(env_or("SVM_WARM_C", "10").c_str());

  const ae::FeaturesReader reader(path);
  const int64_t images = reader.count("train");
  ae::FeatureSplit split = reader.read_views("train", images, views);
  const int V = views.count(), dim = split.dim;
  // The pair's rows in row order (view-major: the first view's rows first), class a then b.
  std::vector<int64_t> rows_a, rows_b;
  for (int64_t r = 0; r < split.n; ++r) {
    if (split.labels[r] == class_a) rows_a.push_back(r);
    if (split.labels[r] == class_b) rows_b.push_back(r);
  }
  const int na = static_cast<int>(rows_a.size()), nb = static_cast<int>(rows_b.size()), n = na + nb;
  const int na1 = na / V, nb1 = nb / V;  // one view's
  ASSERT_EQ(na1 * V, na);
  ASSERT_EQ(nb1 * V, nb);
  // Standardised over the pair's rows, gamma 'scale' (1 / (dim · variance)), as svm-fit does.
  std::vector<double> mean(dim, 0), var(dim, 0);
  auto row = [&](int t) { return split.X.data() + (t < na ? rows_a[t] : rows_b[t - na]) * dim; };
  for (int t = 0; t < n; ++t)
    for (int f = 0; f < dim; ++f) mean[f] += row(t)[f];
  for (double& m : mean) m /= n;
  for (int t = 0; t < n; ++t)
    for (int f = 0; f < dim; ++f) var[f] += (row(t)[f] - mean[f]) * (row(t)[f] - mean[f]);
  double total_var = 0;
  const int64_t ld = svm::cuda::device_row_stride(dim);
  std::vector<float> X(static_cast<size_t>(n) * ld, 0.0f);
  for (int f = 0; f < dim; ++f) var[f] = var[f] / n > 1e-12 ? std::sqrt(var[f] / n) : 0.0;
  for (int t = 0; t < n; ++t)
    for (int f = 0; f < dim; ++f) {
      const double v = var[f] > 0 ? (row(t)[f] - mean[f]) / var[f] : 0.0;
      X[static_cast<size_t>(t) * ld + f] = static_cast<float>(v);
      total_var += v * v;
    }
  const double gamma = 1.0 / (dim * (total_var / (static_cast<double>(n) * dim)));

  cae::cuda::DeviceBuffer<float> d_X(X.size());
  cae::cuda::DeviceBuffer<__half> d_H(X.size());
  cae::cuda::DeviceBuffer<double> d_norms(n);
  cae::cuda::DeviceBuffer<int> d_over(1);
  AE_CUDA_CHECK(cudaMemcpy(d_X.get(), X.data(), X.size() * sizeof(float), cudaMemcpyHostToDevice));
  AE_CUDA_CHECK(cudaMemset(d_over.get(), 0, sizeof(int)));
  svm::cuda::rows_to_half(d_X.get(), static_cast<int64_t>(X.size()), d_H.get(), d_over.get(), nullptr);
  svm::cuda::half_row_squared_norms(d_H.get(), n, dim, ld, d_norms.get(), nullptr);
  d_X.release();
  svm::cuda::WorkingSetRows ws_rows;
  ws_rows.X16 = d_H.get();
  ws_rows.ld = ld;
  ws_rows.norms = d_norms.get();
  svm::cuda::WorkingSetConfig config;
  config.tol = 1e-3;
  config.gamma = gamma;
  size_t free_bytes = 0, total_bytes = 0;
  AE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  config.budget_bytes = static_cast<int64_t>(free_bytes) - svm::cuda::kDeviceReserveBytes;
  cublasHandle_t blas = nullptr;
  ASSERT_EQ(cae::cublas::api().create(&blas), CUBLAS_STATUS_SUCCESS);

  auto solve = [&](int n_a, int n_b, const double* start, std::vector<double>* alpha) {
    svm::cuda::WorkingSetPair pair;
    pair.start_b = na;
    pair.na = n_a;
    pair.nb = n_b;
    pair.Cp = pair.Cn = C;
    pair.start = start;
    const auto t0 = std::chrono::steady_clock::now();
    auto out = svm::cuda::solve_working_sets(blas, ws_rows, {pair}, config, nullptr, {}, nullptr);
    Outcome o;
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.objective = out[0].result.objective;
    o.rounds = out[0].rounds;
    o.rows = out[0].rows_computed;
    for (double a : out[0].alpha) o.sv += a > 0;
    if (alpha) *alpha = std::move(out[0].alpha);
    return o;
  };
  solve(std::min(na1, 500), std::min(nb1, 500), nullptr, nullptr);  // the kernels' first launches, untimed
  const Outcome cold = solve(na, nb, nullptr, nullptr);
  std::vector<double> one;
  const Outcome one_view = solve(na1, nb1, nullptr, &one);
  std::vector<double> first(static_cast<size_t>(n), 0.0), spread(static_cast<size_t>(n), 0.0);
  for (int i = 0; i < na1; ++i) {
    first[i] = one[i];
    for (int v = 0; v < V; ++v) spread[v * na1 + i] = one[i] / V;
  }
  for (int i = 0; i < nb1; ++i) {
    first[na + i] = one[na1 + i];
    for (int v = 0; v < V; ++v) spread[na + v * nb1 + i] = one[na1 + i] / V;
  }
  const Outcome from_first = solve(na, nb, first.data(), nullptr);
  const Outcome from_spread = solve(na, nb, spread.data(), nullptr);
  cae::cublas::api().destroy(blas);
  auto line = [&](const char* name, const Outcome& o, double extra) {
    std::printf("BENCH warm start=%s pair=%d,%d rows=%d dim=%d views=%d seconds=%.3f rounds=%lld kernel_rows=%lld "
                "objective=%.6f sv=%lld\n",
                name, class_a, class_b, n, dim, V, o.seconds + extra, static_cast<long long>(o.rounds),
                static_cast<long long>(o.rows), o.objective, static_cast<long long>(o.sv));
  };
  line("cold", cold, 0);
  line("one-view", one_view, 0);
  line("first", from_first, one_view.seconds);
  line("spread", from_spread, one_view.seconds);
  EXPECT_NEAR(from_first.objective, cold.objective, 1e-3 * std::fabs(cold.objective));
  EXPECT_NEAR(from_spread.objective, cold.objective, 1e-3 * std::fabs(cold.objective));
}
