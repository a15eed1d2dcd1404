// A group of ranks without GPUs (common/group.h, kernels/svm/group_fit.h): where a rank comes
// from, the shared-folder exchange, the balance of the class pairs, and the SVM fitted by two
// ranks (threads here; processes in tests/bats/group.bats) equal to one process's, bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
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

namespace {

// libsvm's pair order: pair q is (first[q], second[q]).
std::vector<std::pair<int, int>> pair_classes(int k) {
  std::vector<std::pair<int, int>> out;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b) out.push_back({a, b});
  return out;
}

// The deal before the class-aware one: longest processing time first on (n_a + n_b)².
std::vector<std::vector<int>> lpt_by_pair_size(const std::vector<int64_t>& sizes, int world) {
  const auto pairs = pair_classes(static_cast<int>(sizes.size()));
  std::vector<std::pair<double, int>> cost;
  for (size_t q = 0; q < pairs.size(); ++q) {
    const double np = static_cast<double>(sizes[size_t(pairs[q].first)] + sizes[size_t(pairs[q].second)]);
    cost.push_back({np * np, int(q)});
  }
  std::stable_sort(cost.begin(), cost.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<double> load(static_cast<size_t>(world), 0.0);
  std::vector<std::vector<int>> out(static_cast<size_t>(world));
  for (const auto& item : cost) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += item.first;
    out[r].push_back(item.second);
  }
  return out;
}

int classes_touched(const std::vector<int>& pairs, int k) {
  const auto pc = pair_classes(k);
  std::set<int> c;
  for (int q : pairs) c.insert(pc[size_t(q)].first), c.insert(pc[size_t(q)].second);
  return int(c.size());
}

const std::vector<std::vector<int64_t>> kDealSizes{
    {500, 400, 300, 100, 100},
    {2000, 2050, 1990, 2010, 1980, 2020, 2005, 1995, 2015, 1985},        // balanced
    {4500, 4000, 3500, 3000, 2500, 2000, 1700, 1300, 900, 600},          // unbalanced
    {6000, 90, 80, 70, 60, 50, 40, 30},                                  // one class dominates
    {3, 5000},                                                           // one pair
};

}  // namespace

TEST(GroupFit, TheDealGivesEveryPairToOneRankTheSameOnEveryCall) {
  for (const auto& sizes : kDealSizes)
    for (int dim : {16, 820, 8192})
      for (int world : {1, 2, 3, 4, 7, 12, 64}) {
        const auto deal = svm::balance_pairs(sizes, dim, world);
        ASSERT_EQ(deal.size(), size_t(world));
        const size_t pairs = sizes.size() * (sizes.size() - 1) / 2;
        std::set<int> seen;
        for (const auto& v : deal) {
          EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
          for (int q : v) {
            EXPECT_TRUE(q >= 0 && size_t(q) < pairs) << q;
            EXPECT_TRUE(seen.insert(q).second) << "pair " << q << " twice";
          }
        }
        EXPECT_EQ(seen.size(), pairs) << "world " << world;
        EXPECT_EQ(deal, svm::balance_pairs(sizes, dim, world));  // the same answer on every rank
        if (world == 1) {
          std::vector<int> all(pairs);
          std::iota(all.begin(), all.end(), 0);
          EXPECT_EQ(deal[0], all);
        }
        if (size_t(world) >= pairs) {  // more ranks than pairs: one pair a rank at most
          for (const auto& v : deal) EXPECT_LE(v.size(), 1u);
        }
      }
  EXPECT_THROW(svm::balance_pairs({10, 10}, 8, 0), std::invalid_argument);
  EXPECT_THROW(svm::balance_pairs({10, 10}, 0, 2), std::invalid_argument);
  EXPECT_THROW(svm::balance_pairs({10, -1}, 8, 2), std::invalid_argument);
  EXPECT_THROW(svm::deal_costs({10, 10}, 8, {{1}}), std::invalid_argument);
}

TEST(GroupFit, TheDealBalancesItsCostModelNoWorseThanLongestPairFirst) {
  for (const auto& sizes : kDealSizes)
    for (int dim : {16, 820, 8192})
      for (int world : {2, 3, 4, 7}) {
        const auto deal = svm::balance_pairs(sizes, dim, world);
        const auto cost = svm::deal_costs(sizes, dim, deal);
        const auto old = svm::deal_costs(sizes, dim, lpt_by_pair_size(sizes, world));
        const double worst = *std::max_element(cost.begin(), cost.end());
        EXPECT_LE(worst, *std::max_element(old.begin(), old.end()) * (1 + 1e-12))
            << "dim " << dim << " world " << world << " classes " << sizes.size();
        // No rank does less than its share of the one-process work allows, less the largest pair.
        std::vector<int> all(sizes.size() * (sizes.size() - 1) / 2);
        std::iota(all.begin(), all.end(), 0);
        const double one = svm::deal_costs(sizes, dim, {all})[0];
        EXPECT_GE(worst, one / world * (1 - 1e-12));
      }
  // Ten unbalanced classes on two ranks: fewer diagonal blocks than two ranks touching every
  // class, and a slowest rank below the old deal's.
  const auto& unbalanced = kDealSizes[2];
  const auto deal = svm::balance_pairs(unbalanced, 820, 2);
  EXPECT_LT(classes_touched(deal[0], 10) + classes_touched(deal[1], 10), 20);
  const auto cost = svm::deal_costs(unbalanced, 820, deal);
  const auto old = svm::deal_costs(unbalanced, 820, lpt_by_pair_size(unbalanced, 2));
  EXPECT_LT(std::max(cost[0], cost[1]), std::max(old[0], old[1]));
  // The costs count a class's block once per rank: one rank holding every pair pays each once.
  EXPECT_DOUBLE_EQ(svm::deal_costs({10, 20}, 4, {{0}})[0],
                   svm::deal_costs({10, 20}, 4, {{0}, {}})[0] + svm::deal_costs({10, 20}, 4, {{}})[0]);
}

TEST(GroupFit, PairDifficultyRanksCloserClassesHarderAndSteersTheDeal) {
  // Three classes on a line: 0 and 1 close, 2 far from both; rows spread around each centre.
  const int dim = 3;
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1.0f);
  const float centre[3] = {0.0f, 1.0f, 10.0f};
  std::vector<float> X;
  std::vector<std::vector<int64_t>> members(3);
  for (int64_t i = 0; i < 3 * 1500; ++i) {  // more rows than kDifficultyRows in each class
    const int c = int(i % 3);
    members[size_t(c)].push_back(i);
    for (int f = 0; f < dim; ++f) X.push_back(centre[c] + noise(rng));
  }
  const auto h = svm::pair_difficulty(X.data(), dim, members);
  ASSERT_EQ(h.size(), 3u);  // pairs (0,1), (0,2), (1,2)
  EXPECT_GT(h[0], 10 * h[1]);
  EXPECT_GT(h[0], 10 * h[2]);
  for (double v : h) EXPECT_TRUE(v > 0 && std::isfinite(v));
  EXPECT_EQ(h, svm::pair_difficulty(X.data(), dim, members));
  // A class of identical rows, and a class of one row: finite, capped.
  std::vector<float> same(6 * dim, 0.5f);
  for (int f = 0; f < dim; ++f) same[size_t(5 * dim + f)] = 0.75f;
  const auto flat = svm::pair_difficulty(same.data(), dim, {{0, 1, 2}, {3, 4}, {5}});
  for (double v : flat) EXPECT_TRUE(v > 0 && std::isfinite(v)) << v;

  // Equal classes, one pair far harder than the rest: two ranks, the hard pair's rank holds
  // fewer pairs; and the difficulties' scale does not matter.
  const std::vector<int64_t> sizes(6, 1000);
  std::vector<double> hard(15, 1.0);
  hard[0] = 20.0;
  const auto deal = svm::balance_pairs(sizes, 64, 2, hard);
  const size_t with_hard = std::find(deal[0].begin(), deal[0].end(), 0) != deal[0].end() ? 0 : 1;
  EXPECT_LT(deal[with_hard].size(), deal[1 - with_hard].size());
  std::vector<double> scaled(hard);
  for (double& v : scaled) v *= 1e-6;
  EXPECT_EQ(deal, svm::balance_pairs(sizes, 64, 2, scaled));
  EXPECT_THROW(svm::balance_pairs(sizes, 64, 2, std::vector<double>(14, 1.0)), std::invalid_argument);
  EXPECT_THROW(svm::balance_pairs(sizes, 64, 2, std::vector<double>(15, 0.0)), std::invalid_argument);
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
