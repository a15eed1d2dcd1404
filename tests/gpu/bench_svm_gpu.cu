// Timing of the GPU SVM's storage paths on one generated problem (not a test: DISABLED_, so
// make test-gpu skips it; bench/svm_scale.sh runs it with --gtest_also_run_disabled_tests).
// The rows: 10 classes in a 12-d latent space through a random ReLU layer, a fifth of the
// units dead (bench/svm_gpu.sh's recipe), standardised; gamma = scale. Each path fits the
// same rows in turn; the table gives seconds, support vectors and the test predictions'
// agreement with the first path's. Prints lines "BENCH path=... ".
// Bench-only settings (environment; production code reads none):
//   SVM_BENCH_ROWS (200000)  SVM_BENCH_DIM (2048)  SVM_BENCH_TEST (5000)  SVM_BENCH_C (10)
//   SVM_BENCH_PATHS (whole-matrix,working-set): any of whole-matrix, working-set,
//     working-set-fp32, working-set-lanes=N, working-set-q=N
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/svm.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

int64_t env_int(const char* name, int64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : def;
}

// A cheap, seekable normal draw: rows generate in parallel, the same on every run.
float normal_at(uint64_t key) {
  uint64_t z = key * 0x9E3779B97F4A7C15ull;
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  const double u1 = (static_cast<double>(mix(z) >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = (static_cast<double>(mix(z + 1) >> 11) + 0.5) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

struct Data {
  std::vector<float> X;
  std::vector<int32_t> y;
};

Data make_rows(int64_t n, int dim, uint64_t salt) {
  constexpr int k = 10, latent = 12;
  std::mt19937 rng(6);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> centres(k * latent), A(static_cast<size_t>(dim) * latent), b(dim);
  for (double& v : centres) v = normal(rng);
  for (double& v : A) v = normal(rng) / std::sqrt(double(latent));
  for (double& v : b) v = -0.3 + 0.5 * normal(rng);
  std::vector<uint8_t> dead(dim, 0);
  for (int f = 0; f < dim; f += 5) dead[f] = 1;
  Data d;
  d.X.resize(static_cast<size_t>(n) * dim);
  d.y.resize(n);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t base = (salt << 56) ^ (static_cast<uint64_t>(r) << 20);
    const int c = static_cast<int>((base >> 20) * 2654435761u % k);
    d.y[r] = c;
    double z[latent];
    for (int j = 0; j < latent; ++j) z[j] = centres[c * latent + j] + 1.5 * normal_at(base + 2 * j);
    for (int f = 0; f < dim; ++f) {
      double v = b[f];
      for (int j = 0; j < latent; ++j) v += A[static_cast<size_t>(f) * latent + j] * z[j];
      v += 0.3 * normal_at(base + 64 + 2 * static_cast<uint64_t>(f));
      d.X[static_cast<size_t>(r) * dim + f] = dead[f] ? 0.f : static_cast<float>(std::max(v, 0.0));
    }
  }
  return d;
}

// Standardises both sets by the training rows' means and deviations (constant units to 0).
void standardise(Data& train, Data& test, int dim) {
  const int64_t n = static_cast<int64_t>(train.y.size());
  std::vector<double> mean(dim, 0), sd(dim, 0);
#pragma omp parallel for schedule(static)
  for (int f = 0; f < dim; ++f) {
    double s = 0, q = 0;
    for (int64_t r = 0; r < n; ++r) s += train.X[static_cast<size_t>(r) * dim + f];
    const double m = s / n;
    for (int64_t r = 0; r < n; ++r) {
      const double e = train.X[static_cast<size_t>(r) * dim + f] - m;
      q += e * e;
    }
    mean[f] = m;
    sd[f] = std::sqrt(q / n);
  }
  for (Data* d : {&train, &test}) {
    const int64_t rows = static_cast<int64_t>(d->y.size());
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      for (int f = 0; f < dim; ++f) {
        float& x = d->X[static_cast<size_t>(r) * dim + f];
        x = sd[f] > 1e-12 ? static_cast<float>((x - mean[f]) / sd[f]) : 0.f;
      }
  }
}

}  // namespace

TEST(BenchSvmGpu, DISABLED_StoragePaths) {
  REQUIRE_GPU();
  const int64_t n = env_int("SVM_BENCH_ROWS", 200000), n_test = env_int("SVM_BENCH_TEST", 5000);
  const int dim = static_cast<int>(env_int("SVM_BENCH_DIM", 2048));
  const double C = static_cast<double>(env_int("SVM_BENCH_C", 10));
  const char* paths_env = std::getenv("SVM_BENCH_PATHS");
  const std::string paths = paths_env && *paths_env ? paths_env : "whole-matrix,working-set";
  auto t0 = std::chrono::steady_clock::now();
  Data train = make_rows(n, dim, 1), test = make_rows(n_test, dim, 2);
  standardise(train, test, dim);
  int live = 0;
  for (int f = 0; f < dim; ++f) live += f % 5 != 0;
  svm::FitParams p;
  p.C = C;
  p.gamma = 1.0 / live;  // 'scale' of standardised rows whose constant units are zero
  p.tol = 1e-3;
  std::printf("BENCH rows=%lld dim=%d test=%lld C=%g gamma=%g generated_s=%.1f\n", static_cast<long long>(n), dim,
              static_cast<long long>(n_test), C, p.gamma,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::vector<int32_t> first;
  std::stringstream list(paths);
  for (std::string path; std::getline(list, path, ',');) {
    svm::cuda::FitOptions o;
    using Path = svm::cuda::FitOptions::Path;
    if (path == "whole-matrix") o.path = Path::whole_matrix;
    else if (path.rfind("working-set", 0) == 0) {
      o.path = Path::working_set;
      o.working_set_float32 = path == "working-set-fp32";
      if (path.rfind("working-set-lanes=", 0) == 0) o.working_set_lanes = std::atoi(path.c_str() + 18);
      if (path.rfind("working-set-q=", 0) == 0) o.working_set_size = std::atoi(path.c_str() + 14);
    } else {
      ADD_FAILURE() << "unknown path " << path;
      continue;
    }
    svm::cuda::FitStats st;
    size_t free0 = 0, total = 0;
    cudaMemGetInfo(&free0, &total);
    t0 = std::chrono::steady_clock::now();
    svm::Model m;
    try {
      m = svm::cuda::fit(train.X.data(), train.y.data(), n, dim, p, nullptr, o, &st);
    } catch (const std::exception& e) {
      std::printf("BENCH path=%s failed: %s\n", path.c_str(), e.what());
      continue;
    }
    const double fit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> dec(static_cast<size_t>(n_test) * m.n_pairs());
    svm::decision_values_gpu(m, test.X.data(), n_test, dec.data());
    const std::vector<int32_t> pred = svm::vote(m, dec.data(), n_test);
    if (first.empty()) first = pred;
    int64_t same = 0, right = 0;
    for (int64_t r = 0; r < n_test; ++r) same += pred[r] == first[r], right += pred[r] == test.y[r];
    int64_t iterations = 0;
    for (int64_t it : st.pair_iterations) iterations += it;
    std::printf("BENCH path=%s fit_s=%.2f kernel_s=%.2f smo_s=%.2f sv=%lld iterations=%lld hit_limit=%d "
                "agreement=%.4f accuracy=%.4f detail=\"%s\"\n",
                path.c_str(), fit_s, st.kernel_s, st.smo_s, static_cast<long long>(m.n_sv()),
                static_cast<long long>(iterations), st.pairs_hit_limit, double(same) / n_test,
                double(right) / n_test, st.detail.c_str());
    std::fflush(stdout);
  }
}
