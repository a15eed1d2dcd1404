// svm-fit on a group of GPU ranks (kernels/svm/group_fit.h): two ranks as threads, each on
// its own GPU when there are two (else both on GPU 0), solve their share of the class pairs
// with solve_pairs_gpu; rank 0's assembled model must be the one-GPU fit_gpu model bit for
// bit (each rank builds the kernel matrix one GPU builds); and the cross-validated grid's
// table must equal one GPU's.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/group.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/svm.h"

namespace {

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

#define REQUIRE_GPU() \
  if (gpu_count() < 1) GTEST_SKIP() << "no CUDA device visible: the GPU group fit cannot be checked here"

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/cae-group-gpu-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// Five overlapping classes of unequal size, random (never all-zero) rows.
struct Problem {
  int64_t n = 0;
  int dim = 24;
  std::vector<float> X;
  std::vector<int32_t> y;
};
Problem problem() {
  Problem p;
  std::mt19937 rng(11);
  std::normal_distribution<float> noise(0.f, 1.f);
  const int sizes[] = {90, 40, 70, 25, 60};
  for (int c = 0; c < 5; ++c)
    for (int i = 0; i < sizes[c]; ++i) {
      p.y.push_back(c);
      for (int d = 0; d < p.dim; ++d) p.X.push_back(noise(rng) + (d % 5 == c ? 1.0f : 0.f));
    }
  p.n = static_cast<int64_t>(p.y.size());
  return p;
}

template <class Work>
auto on_two_gpus(const std::string& base, Work work) {
  using R = decltype(work(std::declval<cae::GroupExchange&>()));
  std::vector<R> out(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      cae::select_group_gpu(r);  // the current GPU is per host thread
      cae::GroupExchange g(r, 2, base, 120);
      out[static_cast<size_t>(r)] = work(g);
      g.finish();
    });
  for (auto& t : ranks) t.join();
  return out[0];
}

TEST(SvmGroupGpu, TwoRanksFitTheOneGpuModelBitForBit) {
  REQUIRE_GPU();
  const Problem pr = problem();
  svm::FitParams p;
  p.C = 3;
  p.gamma = 0.5 / pr.dim;
  p.log_summary = false;
  cae::select_group_gpu(0);
  const svm::Model one = svm::fit_gpu(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, {});
  TempDir dir;
  const svm::Model two = on_two_gpus(dir.path + "/fit", [&](cae::GroupExchange& g) {
    return svm::fit_on_group(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, cae::Device::gpu, g);
  });
  EXPECT_GT(one.n_sv(), 0);
  EXPECT_EQ(two.support_indices, one.support_indices);
  EXPECT_EQ(two.n_support, one.n_support);
  EXPECT_EQ(two.dual_coef, one.dual_coef);
  EXPECT_EQ(two.rho, one.rho);
  EXPECT_EQ(two.support_vectors, one.support_vectors);
}

TEST(SvmGroupGpu, CrossValidatedGridEqualsOneGpu) {
  REQUIRE_GPU();
  const Problem pr = problem();
  const std::vector<double> Cs{1, 10};
  const std::vector<std::string> gammas{"scale", "2x"};
  svm::ClassifierParams params;
  cae::select_group_gpu(0);
  const svm::ModelSelection one =
      svm::cross_validate(pr.X.data(), pr.y.data(), pr.n, pr.dim, params, Cs, gammas, 3, 7, cae::Device::gpu);
  TempDir dir;
  const svm::ModelSelection two = on_two_gpus(dir.path + "/cv", [&](cae::GroupExchange& g) {
    svm::ClassifierParams q = params;
    q.group = &g;
    return svm::cross_validate(pr.X.data(), pr.y.data(), pr.n, pr.dim, q, Cs, gammas, 3, 7, cae::Device::gpu);
  });
  EXPECT_EQ(two.cv_accuracy, one.cv_accuracy);
  EXPECT_EQ(two.fold_accuracy, one.fold_accuracy);
  EXPECT_EQ(two.best_C, one.best_C);
  EXPECT_EQ(two.best_gamma, one.best_gamma);
  EXPECT_GT(one.best_accuracy(), 0.3);
}

}  // namespace
