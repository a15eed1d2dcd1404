// A group of ranks without GPUs (common/group.h, kernels/svm/group_fit.h): where a rank comes
// from, the shared-folder exchange, the balance of the class pairs, and the SVM fitted by two
// ranks (threads here; processes in tests/bats/group.bats) equal to one process's, bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/group.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/probability.h"
#include "tests/support/temp_dir.h"

namespace {

cae::EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

using cae_test::TempDir;

TEST(GroupPlace, OptionsThenSlurmThenTorchrunElseNone) {
  const auto none = env_of({});
  cae::GroupPlace p = cae::resolve_group_place(-1, -1, -1, none);
  EXPECT_FALSE(p.grouped());
  EXPECT_EQ(p.source, "none");
  p = cae::resolve_group_place(1, 3, -1, none);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world, 3);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.source, "options");
  p = cae::resolve_group_place(-1, -1, -1, env_of({{"WORLD_SIZE", "4"}, {"RANK", "2"}, {"LOCAL_RANK", "0"}}));
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.world, 4);
  EXPECT_EQ(p.local_rank, 0);
  EXPECT_EQ(p.source, "torchrun");
  // Slurm's step wins over torchrun's variables; a step of one task is not a group.
  p = cae::resolve_group_place(-1, -1, -1,
                               env_of({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"WORLD_SIZE", "4"},
                                       {"RANK", "3"}}));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world, 2);
  EXPECT_EQ(p.source, "slurm");
  EXPECT_FALSE(cae::resolve_group_place(-1, -1, -1, env_of({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}}))
                   .grouped());
  EXPECT_THROW(cae::resolve_group_place(-1, -1, -1, env_of({{"WORLD_SIZE", "2"}})), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(-1, -1, -1, env_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}})), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(2, 2, -1, none), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(0, -1, -1, none), cae::UsageError);
}

TEST(GroupPlace, RendezvousIsNamedAfterTheLaunch) {
  cae::GroupPlace p;
  p.world = 2;
  EXPECT_EQ(cae::group_rendezvous_path("/x/r", "out/svm.h5", p), "/x/r");
  EXPECT_EQ(cae::group_rendezvous_path("", "out/svm.h5", p, "123"), "out/.svm.h5.group-123");
  p.source = "slurm";
  EXPECT_EQ(cae::group_rendezvous_path("", "svm.h5", p, "", env_of({{"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}})),
            ".svm.h5.group-slurm-77.3");
  p.source = "torchrun";
  EXPECT_EQ(cae::group_rendezvous_path("", "svm.h5", p, "", env_of({{"TORCHELASTIC_RUN_ID", "a/b"}})),
            ".svm.h5.group-torchrun-a_b");
  EXPECT_THROW(cae::group_rendezvous_path("", "svm.h5", p, "", env_of({})), cae::UsageError);
  // torchrun without --rdzv-id says "none": not a name unique to the launch.
  EXPECT_THROW(cae::group_rendezvous_path("", "svm.h5", p, "", env_of({{"TORCHELASTIC_RUN_ID", "none"}})),
               cae::UsageError);
}

TEST(GroupExchange, GathersInRankOrderAndCleansUp) {
  TempDir dir;
  const std::string base = dir.path + "/launch";
  std::vector<std::vector<std::vector<unsigned char>>> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      cae::GroupExchange g(r, 3, base, 20);
      const std::vector<unsigned char> mine(size_t(r + 1), static_cast<unsigned char>(10 + r));
      got[size_t(r)] = g.gather("t", mine, true);
      const auto to_lead = g.gather("t", {static_cast<unsigned char>(r)});  // the same tag again
      if (r == 0) {
        ASSERT_EQ(to_lead.size(), 3u);
        for (int s = 0; s < 3; ++s) EXPECT_EQ(to_lead[size_t(s)], std::vector<unsigned char>{static_cast<unsigned char>(s)});
      } else {
        EXPECT_TRUE(to_lead.empty());
      }
      g.finish();
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(got[size_t(r)].size(), 3u);
    for (int s = 0; s < 3; ++s)
      EXPECT_EQ(got[size_t(r)][size_t(s)], std::vector<unsigned char>(size_t(s + 1), static_cast<unsigned char>(10 + s)));
  }
  // finish() left nothing behind.
  EXPECT_EQ(std::system(("test -z \"$(ls -A '" + dir.path + "')\"").c_str()), 0);
}

TEST(GroupExchange, ASilentRankIsNamedWithinTheTimeout) {
  TempDir dir;
  cae::GroupExchange lead(0, 2, dir.path + "/launch", 1.0);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    lead.gather("pairs", {1, 2, 3});
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 of 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST(GroupExchange, BytesAreCheckedBeforeUse) {
  cae::ByteWriter w;
  w.put<uint64_t>(1000000);  // a list claiming far more values than the bytes hold
  cae::ByteReader r(w.bytes(), "rank 1's results");
  EXPECT_THROW(r.get_vector<double>(), std::runtime_error);
  std::vector<svm::PairSolution> s(2);
  s[0].pair = 3;
  s[0].alpha = {0.5, 0, 1.25};
  s[0].rho = -0.75;
  s[0].iterations = 12;
  s[1].pair = 0;
  s[1].alpha = {2.0};
  s[1].hit_iteration_limit = true;
  std::vector<unsigned char> bytes = svm::solutions_to_bytes(s);
  const auto back = svm::solutions_from_bytes(bytes, "x");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].pair, 3);
  EXPECT_EQ(back[0].alpha, s[0].alpha);
  EXPECT_EQ(back[0].rho, -0.75);
  EXPECT_EQ(back[0].iterations, 12);
  EXPECT_TRUE(back[1].hit_iteration_limit);
  bytes.pop_back();
  EXPECT_THROW(svm::solutions_from_bytes(bytes, "x"), std::runtime_error);
}

TEST(GroupFit, PairsAreBalancedByTheirSize) {
  const std::vector<int64_t> sizes{500, 400, 300, 100, 100};
  for (int world : {1, 2, 3, 7, 12}) {
    const auto share = svm::balance_pairs(sizes, world);
    ASSERT_EQ(share.size(), size_t(world));
    std::set<int> seen;
    for (const auto& v : share)
      for (int q : v) EXPECT_TRUE(seen.insert(q).second) << "pair " << q << " twice";
    EXPECT_EQ(seen.size(), 10u);
    EXPECT_EQ(share, svm::balance_pairs(sizes, world));  // the same answer on every rank
  }
  // Two ranks: LPT's loads are within the largest pair of each other.
  const auto two = svm::balance_pairs(sizes, 2);
  std::vector<int64_t> load(2, 0);
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < 5; ++a)
    for (int b = a + 1; b < 5; ++b) pairs.push_back({a, b});
  for (int r = 0; r < 2; ++r)
    for (int q : two[size_t(r)]) {
      const int64_t np = sizes[size_t(pairs[size_t(q)].first)] + sizes[size_t(pairs[size_t(q)].second)];
      load[size_t(r)] += np * np;
    }
  EXPECT_LE(std::llabs(load[0] - load[1]), 900LL * 900LL);
  EXPECT_GT(std::min(load[0], load[1]), 0);
}

// Four classes of random rows, not separable: a real SVM problem with free and bound SVs.
struct Problem {
  int64_t n = 160;
  int dim = 12;
  std::vector<float> X;
  std::vector<int32_t> y;
};
Problem problem() {
  Problem p;
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.f, 1.f);
  for (int64_t i = 0; i < p.n; ++i) {
    const int c = static_cast<int>((i * 7) % 4);
    p.y.push_back(c);
    for (int d = 0; d < p.dim; ++d) p.X.push_back(noise(rng) + (d % 4 == c ? 1.2f : 0.f));
  }
  return p;
}

void expect_same_model(const svm::Classifier& a, const svm::Classifier& b) {
  const svm::Model &x = a.model(), &y = b.model();
  EXPECT_EQ(x.classes, y.classes);
  EXPECT_EQ(x.n_support, y.n_support);
  EXPECT_EQ(x.support_indices, y.support_indices);
  EXPECT_EQ(x.support_vectors, y.support_vectors);  // exact, not near
  EXPECT_EQ(x.dual_coef, y.dual_coef);
  EXPECT_EQ(x.rho, y.rho);
  EXPECT_EQ(x.gamma, y.gamma);
  EXPECT_GT(x.n_sv(), 0);
}

// Runs `work(rank's params)` on `world` ranks as threads of this process; returns rank 0's result.
template <class Work>
auto on_group(int world, const std::string& base, Work work) {
  using R = decltype(work(svm::ClassifierParams{}, 0));
  std::vector<R> out(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      cae::GroupExchange g(r, world, base, 60);
      svm::ClassifierParams p;
      p.gamma = "scale";
      p.C = 3;
      p.group = &g;
      out[size_t(r)] = work(p, r);
      g.finish();
    });
  for (auto& t : ranks) t.join();
  return out[0];
}

TEST(GroupFit, TwoAndThreeRanksFitTheOneProcessModelBitForBit) {
  const Problem pr = problem();
  svm::ClassifierParams p1;
  p1.C = 3;
  std::vector<float> X1 = pr.X;
  svm::Classifier one;
  one.fit(X1.data(), pr.y.data(), pr.n, pr.dim, p1, cae::Device::cpu);
  for (int world : {2, 3}) {
    TempDir dir;
    const svm::Classifier grouped = on_group(world, dir.path + "/fit", [&](svm::ClassifierParams p, int) {
      std::vector<float> X = pr.X;
      svm::Classifier c;
      c.fit(X.data(), pr.y.data(), pr.n, pr.dim, p, cae::Device::cpu);
      return c;
    });
    expect_same_model(grouped, one);
  }
}

TEST(GroupFit, CrossValidationGridAndSigmoidsEqualOneProcess) {
  const Problem pr = problem();
  const std::vector<double> Cs{0.5, 3};
  const std::vector<std::string> gammas{"0.5x", "scale", "2x"};
  svm::ClassifierParams p1;
  const svm::ModelSelection one = svm::cross_validate(pr.X.data(), pr.y.data(), pr.n, pr.dim, p1, Cs, gammas, 3, 5,
                                                      cae::Device::cpu);
  p1.C = 3;
  const svm::Sigmoids sig_one = svm::fit_sigmoids(pr.X.data(), pr.y.data(), pr.n, pr.dim, p1, 5, 5, cae::Device::cpu);
  TempDir dir;
  struct Both {
    svm::ModelSelection s;
    svm::Sigmoids sig;
  };
  const Both two = on_group(2, dir.path + "/cv", [&](svm::ClassifierParams p, int) {
    Both b;
    b.s = svm::cross_validate(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, Cs, gammas, 3, 5, cae::Device::cpu);
    b.sig = svm::fit_sigmoids(pr.X.data(), pr.y.data(), pr.n, pr.dim, p, 5, 5, cae::Device::cpu);
    return b;
  });
  EXPECT_EQ(two.s.cv_accuracy, one.cv_accuracy);
  EXPECT_EQ(two.s.fold_accuracy, one.fold_accuracy);
  EXPECT_EQ(two.s.gamma_resolved, one.gamma_resolved);
  EXPECT_EQ(two.s.best_C, one.best_C);
  EXPECT_EQ(two.s.best_gamma, one.best_gamma);
  EXPECT_GT(*std::max_element(one.cv_accuracy.begin(), one.cv_accuracy.end()), 0.3);
  EXPECT_EQ(two.sig.A, sig_one.A);
  EXPECT_EQ(two.sig.B, sig_one.B);
  ASSERT_EQ(sig_one.A.size(), 6u);
}

}  // namespace
