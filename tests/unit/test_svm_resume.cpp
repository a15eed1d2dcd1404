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
#include "common/hdf5_io.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/probability.h"
#include "kernels/svm/resume.h"
#include "tests/support/svm_problems.h"
#include "tests/support/temp_dir.h"

namespace {

// Overlapping Gaussian clouds of `classes` classes in random order.
using Rows = svm_test::Problem;
Rows clouds(int n, int dim, int classes, unsigned seed) { return svm_test::make_problem(n, dim, classes, seed); }

using cae_test::TempDir;

// A stop request after `units` calls of stop_requested (one call per unit about to start).
std::function<bool()> stop_after(int units) {
  auto calls = std::make_shared<int>(0);
  return [calls, units] { return (*calls)++ >= units; };
}

const std::vector<double> kC{1.0, 10.0};
const std::vector<std::string> kGamma{"0.5x", "scale", "2x"};
constexpr int kFolds = 3;

svm::ModelSelection grid(const Rows& d, svm::UnitLog* log, cae::GroupExchange* group = nullptr,
                         svm::Scoring scoring = svm::Scoring::accuracy) {
  svm::ClassifierParams p;
  p.group = group;
  return svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, p, kC, kGamma, kFolds, 7, cae::Device::cpu, {}, 1,
                             log, scoring);
}

void expect_same_table(const svm::ModelSelection& a, const svm::ModelSelection& b) {
  EXPECT_EQ(a.cv_accuracy, b.cv_accuracy);  // exact
  EXPECT_EQ(a.fold_accuracy, b.fold_accuracy);
  EXPECT_EQ(a.gamma_resolved, b.gamma_resolved);
  EXPECT_EQ(a.best_C, b.best_C);
  EXPECT_EQ(a.best_gamma, b.best_gamma);
  EXPECT_EQ(a.scoring, b.scoring);
  EXPECT_EQ(a.cv_score, b.cv_score);
  EXPECT_EQ(a.fold_score, b.fold_score);
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
  // A record: the resolved gamma, then per C the count K·K and the confusion matrix.
  svm::UnitLog altered;
  altered.finished = last.finished;
  std::vector<unsigned char>& cell0 = altered.finished.at(0);  // fold 1, gamma 0.5x
  const size_t K = 3, matrix = sizeof(uint64_t) + K * K * sizeof(int64_t);
  ASSERT_EQ(cell0.size(), sizeof(double) + kC.size() * matrix);
  int64_t confusion[9];  // C 1's
  std::memcpy(confusion, cell0.data() + sizeof(double) + sizeof(uint64_t), sizeof confusion);
  int64_t right = 0, held = 0;
  for (size_t t = 0; t < K; ++t)
    for (size_t p = 0; p < K; ++p) {
      held += confusion[t * K + p];
      right += t == p ? confusion[t * K + p] : 0;
    }
  ASSERT_GT(held, 0);
  confusion[1] += 1000;  // 1000 more images of class 0 predicted as class 1
  std::memcpy(cell0.data() + sizeof(double) + sizeof(uint64_t), confusion, sizeof confusion);
  EXPECT_EQ(grid(d, &altered).fold_accuracy[0], static_cast<double>(right) / static_cast<double>(held + 1000));
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

// The cells hold confusion matrices, not a scoring's numbers: a grid stopped under one
// --cv-scoring resumes under another into that scoring's table and choice.
TEST(SvmResume, AGridStoppedUnderOneScoringResumesUnderAnother) {
  const Rows d = clouds(150, 6, 3, 5);
  for (svm::Scoring scoring : {svm::Scoring::macro_f1, svm::Scoring::balanced_accuracy}) {
    SCOPED_TRACE(svm::scoring_name(scoring));
    const svm::ModelSelection full = grid(d, nullptr, nullptr, scoring);
    svm::UnitLog first;
    first.stop_requested = stop_after(4);
    grid(d, &first);  // by accuracy
    ASSERT_TRUE(first.stopped);
    ASSERT_EQ(first.finished.size(), 4u);
    svm::UnitLog rest;
    rest.finished = first.finished;
    expect_same_table(full, grid(d, &rest, nullptr, scoring));
    EXPECT_FALSE(rest.stopped);
  }
}

// --cv-scoring log_loss: a cell's record adds its log-loss, so a log_loss grid stopped
// mid-way resumes into the uninterrupted table; cells computed without log-loss (another
// scoring's run) are computed again under log_loss, and log_loss cells again under the others.
TEST(SvmResume, ALogLossGridResumesToTheUninterruptedTable) {
  const Rows d = clouds(120, 4, 3, 6);
  const svm::ModelSelection full = grid(d, nullptr, nullptr, svm::Scoring::log_loss);
  ASSERT_LT(full.best_score(), 0.0);
  svm::UnitLog first;
  first.stop_requested = stop_after(2);
  grid(d, &first, nullptr, svm::Scoring::log_loss);
  ASSERT_TRUE(first.stopped);
  ASSERT_EQ(first.finished.size(), 2u);
  EXPECT_EQ(first.computed_for, "log_loss");
  svm::UnitLog rest;
  rest.finished = first.finished;
  rest.computed_for = first.computed_for;
  expect_same_table(full, grid(d, &rest, nullptr, svm::Scoring::log_loss));
  EXPECT_FALSE(rest.stopped);
  for (const auto& [cell, bytes] : first.finished) EXPECT_EQ(rest.finished.at(cell), bytes);  // replayed

  // Cells of an accuracy run hold no log-loss: under log_loss every cell is computed again.
  svm::UnitLog by_accuracy;
  by_accuracy.stop_requested = stop_after(3);
  grid(d, &by_accuracy);
  ASSERT_EQ(by_accuracy.finished.size(), 3u);
  EXPECT_EQ(by_accuracy.computed_for, "");
  svm::UnitLog resumed;
  resumed.finished = by_accuracy.finished;
  expect_same_table(full, grid(d, &resumed, nullptr, svm::Scoring::log_loss));
  EXPECT_EQ(resumed.computed_for, "log_loss");
  EXPECT_EQ(resumed.finished.size(), size_t(kFolds) * kGamma.size());
  for (const auto& [cell, bytes] : by_accuracy.finished) EXPECT_NE(resumed.finished.at(cell), bytes);
  // And log_loss cells resumed under accuracy: computed again into accuracy's table.
  svm::UnitLog back;
  back.finished = first.finished;
  back.computed_for = first.computed_for;
  expect_same_table(grid(d, nullptr), grid(d, &back));
  EXPECT_EQ(back.computed_for, "");

  // The resume file keeps what the cells were computed for.
  TempDir dir;
  const std::string path = svm::resume_path(dir.path + "/svm.h5");
  svm::TrainUnits units, loaded;
  units.cv = first;
  svm::save_resume(path, "f", units);
  ASSERT_TRUE(svm::load_resume(path, "f", loaded));
  EXPECT_EQ(loaded.cv.computed_for, "log_loss");
  EXPECT_EQ(loaded.cv.finished, first.finished);
}

// The probability folds are of the pair the grid chose: units computed for another pair
// are dropped, those of the same pair kept.
TEST(SvmResume, ProbabilityUnitsOfAnotherPairAreComputedAgain) {
  svm::UnitLog log;
  log.finished[0] = {1, 2};
  log.finished[3] = {3};
  log.computed_for = "C 10, gamma scale";
  EXPECT_EQ(log.compute_for("C 10, gamma scale"), 0u);
  EXPECT_EQ(log.finished.size(), 2u);
  EXPECT_EQ(log.compute_for("C 1, gamma 2x"), 2u);
  EXPECT_TRUE(log.finished.empty());
  EXPECT_EQ(log.computed_for, "C 1, gamma 2x");
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
  units.probability.computed_for = "C 10, gamma 0.5x";
  svm::save_resume(path, "C 1,10; features f.h5", units);
  svm::TrainUnits back;
  ASSERT_TRUE(svm::load_resume(path, "C 1,10; features f.h5", back));
  EXPECT_EQ(back.cv.finished, units.cv.finished);
  EXPECT_EQ(back.probability.finished, units.probability.finished);
  EXPECT_EQ(back.probability.computed_for, "C 10, gamma 0.5x");
  EXPECT_EQ(back.cv.computed_for, "");
  try {
    svm::load_resume(path, "C 1,100; features f.h5", back);
    FAIL() << "another fingerprint was accepted";
  } catch (const cae::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + " was written by svm-fit with other options"), std::string::npos);
  }
  // A file of the first layout (cells of right counts) is refused, not misread.
  {
    cae::Hdf5Writer w(path);
    w.set_attr("/", "format", "svm-fit-resume");
    w.set_attr("/", "format_version", 1);
    w.set_attr("/", "fingerprint", "C 1,10; features f.h5");
    w.close();
  }
  try {
    svm::load_resume(path, "C 1,10; features f.h5", back);
    FAIL() << "a format_version 1 file was accepted";
  } catch (const cae::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(path + " was written by an older svm-fit"), std::string::npos) << e.what();
  }
}
