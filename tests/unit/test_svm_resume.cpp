// svm-fit's preemption (kernels/svm/resume.h): cross_validate and fit_sigmoids stop between
// units when asked, keep the finished units, and a run given them replays them into the
// table and sigmoids of a run that never stopped, on one process and on a group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/group.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/probability.h"
#include "kernels/svm/resume.h"

namespace {

struct Rows {
  std::vector<float> X;
  std::vector<int32_t> y;
  int64_t n = 0;
  int dim = 0;
};

// Overlapping Gaussian clouds of `classes` classes in random order.
Rows clouds(int n, int dim, int classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> centres(static_cast<size_t>(classes) * dim);
  for (double& c : centres) c = normal(rng);
  Rows r;
  r.n = n;
  r.dim = dim;
  for (int i = 0; i < n; ++i) {
    const int c = i < classes ? i : static_cast<int>(rng() % static_cast<unsigned>(classes));
    r.y.push_back(c);
    for (int f = 0; f < dim; ++f) r.X.push_back(static_cast<float>(centres[c * dim + f] + 1.2 * normal(rng)));
  }
  return r;
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/test_svm_resume_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { (void)!system(("rm -rf '" + path + "'").c_str()); }
};

// A stop request after `units` calls of stop_requested (one call per unit about to start).
std::function<bool()> stop_after(int units) {
  auto calls = std::make_shared<int>(0);
  return [calls, units] { return (*calls)++ >= units; };
}

const std::vector<double> kC{1.0, 10.0};
const std::vector<std::string> kGamma{"0.5x", "scale", "2x"};
constexpr int kFolds = 3;

svm::ModelSelection grid(const Rows& d, svm::UnitLog* log, cae::GroupExchange* group = nullptr) {
  svm::ClassifierParams p;
  p.group = group;
  return svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, p, kC, kGamma, kFolds, 7, cae::Device::cpu, {}, 1,
                             log);
}

void expect_same_table(const svm::ModelSelection& a, const svm::ModelSelection& b) {
  EXPECT_EQ(a.cv_accuracy, b.cv_accuracy);  // exact
  EXPECT_EQ(a.fold_accuracy, b.fold_accuracy);
  EXPECT_EQ(a.gamma_resolved, b.gamma_resolved);
  EXPECT_EQ(a.best_C, b.best_C);
  EXPECT_EQ(a.best_gamma, b.best_gamma);
}

}  // namespace

TEST(SvmResume, CrossValidationStopsBetweenCellsAndReplaysTheFinishedOnes) {
  const Rows d = clouds(150, 6, 3, 5);
  const svm::ModelSelection full = grid(d, nullptr);
  ASSERT_GT(full.best_accuracy(), 0.4);

  svm::UnitLog first;
  first.stop_requested = stop_after(2);
  grid(d, &first);
  EXPECT_TRUE(first.stopped);
  ASSERT_EQ(first.finished.size(), 2u);

  svm::UnitLog second;  // resumed, stopped again: the replayed cells stay, one more is added
  second.finished = first.finished;
  second.stop_requested = stop_after(1);
  grid(d, &second);
  EXPECT_TRUE(second.stopped);
  ASSERT_EQ(second.finished.size(), 3u);
  for (const auto& [cell, bytes] : first.finished) EXPECT_EQ(second.finished.at(cell), bytes);

  svm::UnitLog last;
  last.finished = second.finished;
  const svm::ModelSelection resumed = grid(d, &last);
  EXPECT_FALSE(last.stopped);
  EXPECT_EQ(last.finished.size(), size_t(kFolds) * kGamma.size());
  expect_same_table(full, resumed);

  // A finished cell is replayed, not fitted again: an altered record shows in the table.
  svm::UnitLog altered;
  altered.finished = last.finished;
  std::vector<unsigned char>& cell0 = altered.finished.at(0);  // fold 1, gamma 0.5x
  const double wrong = 0.125;
  std::memcpy(cell0.data() + sizeof(double) + sizeof(int64_t), &wrong, sizeof wrong);  // C 1's accuracy
  EXPECT_EQ(grid(d, &altered).fold_accuracy[0], wrong);
  // A damaged record is refused, naming what it is.
  altered.finished.at(1).pop_back();
  try {
    grid(d, &altered);
    FAIL() << "a truncated record was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cross-validation results of fold 1, gamma scale"), std::string::npos)
        << e.what();
  }
}

TEST(SvmResume, ProbabilityFoldsStopAndResumeToTheSameSigmoids) {
  const Rows d = clouds(160, 5, 3, 9);
  svm::ClassifierParams p;
  p.C = 3;
  auto fit = [&](svm::UnitLog* log) {
    return svm::fit_sigmoids(d.X.data(), d.y.data(), d.n, d.dim, p, 5, 11, cae::Device::cpu, 1, {}, log);
  };
  const svm::Sigmoids full = fit(nullptr);
  ASSERT_EQ(full.A.size(), 3u);
  svm::UnitLog log;
  log.stop_requested = stop_after(2);
  EXPECT_TRUE(fit(&log).A.empty());
  EXPECT_TRUE(log.stopped);
  EXPECT_EQ(log.finished.size(), 2u);
  log.stop_requested = nullptr;
  log.stopped = false;
  const svm::Sigmoids resumed = fit(&log);
  EXPECT_FALSE(log.stopped);
  EXPECT_EQ(log.finished.size(), 5u);
  EXPECT_EQ(full.A, resumed.A);  // exact
  EXPECT_EQ(full.B, resumed.B);
  for (double a : resumed.A) EXPECT_NE(a, 0.0);
}

TEST(SvmResume, AGroupStopsTogetherAndAnotherGroupSizeResumesIt) {
  const Rows d = clouds(150, 6, 3, 5);
  const svm::ModelSelection full = grid(d, nullptr);
  TempDir dir;
  // Two ranks; only rank 1 is asked to stop, after its first cell: both stop, and rank 0
  // holds every rank's finished cells.
  std::vector<svm::UnitLog> logs(2);
  logs[1].stop_requested = stop_after(1);
  {
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        cae::GroupExchange g(r, 2, dir.path + "/a", 60);
        grid(d, &logs[size_t(r)], &g);
        g.finish();
      });
    for (auto& t : ranks) t.join();
  }
  EXPECT_TRUE(logs[0].stopped && logs[1].stopped);
  const size_t kept = logs[0].finished.size();
  EXPECT_GE(kept, 1u);
  EXPECT_LT(kept, size_t(kFolds) * kGamma.size());
  // Three ranks resume from rank 0's cells (each replays those of its own share).
  std::vector<svm::ModelSelection> tables(3);
  std::vector<svm::UnitLog> resumed(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      resumed[size_t(r)].finished = logs[0].finished;
      cae::GroupExchange g(r, 3, dir.path + "/b", 60);
      tables[size_t(r)] = grid(d, &resumed[size_t(r)], &g);
      g.finish();
    });
  for (auto& t : ranks) t.join();
  for (const auto& t : tables) expect_same_table(full, t);
  EXPECT_EQ(resumed[0].finished.size(), size_t(kFolds) * kGamma.size());
}

TEST(SvmResume, TheResumeFileKeepsTheUnitsAndRefusesOtherOptions) {
  TempDir dir;
  const std::string path = svm::resume_path(dir.path + "/svm.h5");
  EXPECT_EQ(path, dir.path + "/svm.h5.resume.h5");
  svm::TrainUnits none;
  EXPECT_FALSE(svm::load_resume(path, "x", none));
  std::mt19937 rng(3);
  svm::TrainUnits units;
  for (int64_t cell : {0, 4, 5}) {
    std::vector<unsigned char> b(size_t(8 + cell));
    for (auto& v : b) v = static_cast<unsigned char>(rng());
    units.cv.finished[cell] = b;
  }
  units.probability.finished[2] = {};  // an empty record stays a record
  units.probability.finished[3] = {1, 2, 3};
  svm::save_resume(path, "C 1,10; features f.h5", units);
  svm::TrainUnits back;
  ASSERT_TRUE(svm::load_resume(path, "C 1,10; features f.h5", back));
  EXPECT_EQ(back.cv.finished, units.cv.finished);
  EXPECT_EQ(back.probability.finished, units.probability.finished);
  try {
    svm::load_resume(path, "C 1,100; features f.h5", back);
    FAIL() << "another fingerprint was accepted";
  } catch (const cae::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + " was written by svm-fit with other options"), std::string::npos);
  }
}
