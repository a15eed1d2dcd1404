// svm-fit --cv and the (C, gamma) grid (kernels/svm/model_selection.h): stratified folds,
// the list and gamma-spec parsers, the table and the refit of its best pair, and the
// scorings that choose it (--cv-scoring).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/train.h"
#include "tests/support/svm_shortcuts.h"

namespace {

struct Data {
  std::vector<float> X;
  std::vector<int32_t> y;
  int64_t n = 0;
  int dim = 0;
};

// Gaussian clouds around random centres; `spread` sets the overlap. Labels in random order,
// class sizes uneven (class c has weight c + 1).
Data make_data(int n, int dim, int classes, unsigned seed, double spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> centres(static_cast<size_t>(classes) * dim);
  for (double& c : centres) c = normal(rng);
  // Class c with weight c + 1, drawn from the raw generator (the std distributions differ
  // between standard libraries).
  const unsigned total = static_cast<unsigned>(classes * (classes + 1) / 2);
  auto pick = [&] {
    unsigned u = static_cast<unsigned>(rng() % total);
    int c = 0;
    while (u >= static_cast<unsigned>(c + 1)) u -= static_cast<unsigned>(++c);
    return c;
  };
  Data d;
  d.n = n;
  d.dim = dim;
  d.X.resize(static_cast<size_t>(n) * dim);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    const int c = i < classes ? i : pick();
    d.y[i] = c;
    for (int f = 0; f < dim; ++f)
      d.X[static_cast<size_t>(i) * dim + f] = static_cast<float>(centres[c * dim + f] + spread * normal(rng));
  }
  return d;
}

// Gaussian clouds of the given class sizes (labels in random order), for scorings that
// weigh a small class as much as a large one.
Data make_imbalanced(const std::vector<int>& sizes, int dim, unsigned seed, double spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<int32_t> labels;
  for (size_t c = 0; c < sizes.size(); ++c) labels.insert(labels.end(), sizes[c], static_cast<int32_t>(c));
  for (size_t i = labels.size(); i > 1; --i) std::swap(labels[i - 1], labels[rng() % i]);
  std::vector<double> centres(sizes.size() * static_cast<size_t>(dim));
  for (double& c : centres) c = normal(rng);
  Data d;
  d.n = static_cast<int64_t>(labels.size());
  d.dim = dim;
  d.y = labels;
  for (int32_t c : labels)
    for (int f = 0; f < dim; ++f) d.X.push_back(static_cast<float>(centres[c * dim + f] + spread * normal(rng)));
  return d;
}

// scikit-learn's f1_score(average="macro") and balanced_accuracy_score, straight from labels
// and predictions (not through kernels/svm/metrics): the macro average runs over the classes
// in the labels or the predictions, the balanced accuracy over those in the labels.
double macro_f1_of(const std::vector<int32_t>& y, const std::vector<int32_t>& pred) {
  std::set<int32_t> present(y.begin(), y.end());
  present.insert(pred.begin(), pred.end());
  double sum = 0;
  for (int32_t c : present) {
    double tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      tp += y[i] == c && pred[i] == c;
      fp += y[i] != c && pred[i] == c;
      fn += y[i] == c && pred[i] != c;
    }
    sum += tp + fp + fn > 0 ? 2 * tp / (2 * tp + fp + fn) : 0.0;
  }
  return sum / static_cast<double>(present.size());
}

double balanced_accuracy_of(const std::vector<int32_t>& y, const std::vector<int32_t>& pred) {
  const std::set<int32_t> present(y.begin(), y.end());
  double sum = 0;
  for (int32_t c : present) {
    double right = 0, support = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      support += y[i] == c;
      right += y[i] == c && pred[i] == c;
    }
    sum += right / support;
  }
  return sum / static_cast<double>(present.size());
}

template <typename F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const cae::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

// Fold f of `fold` by hand: its training rows (tr, ytr) and its held-out rows (te, yte).
void split_fold(const Data& d, const std::vector<int>& fold, int f, std::vector<float>& tr, std::vector<int32_t>& ytr,
                std::vector<float>& te, std::vector<int32_t>& yte) {
  for (int64_t r = 0; r < d.n; ++r) {
    auto& X = fold[r] == f ? te : tr;
    X.insert(X.end(), d.X.begin() + r * d.dim, d.X.begin() + (r + 1) * d.dim);
    (fold[r] == f ? yte : ytr).push_back(d.y[r]);
  }
}

}  // namespace

TEST(SvmFolds, EveryClassIsSpreadEvenlyAndTheFoldsPartitionTheRows) {
  // Class sizes 3, 7, 10, 13, 30 in a shuffled order; 3 folds.
  std::vector<int32_t> y;
  const std::map<int32_t, int> sizes{{2, 3}, {5, 7}, {7, 10}, {8, 13}, {11, 30}};
  for (const auto& [label, count] : sizes) y.insert(y.end(), count, label);
  std::mt19937 rng(4);
  std::shuffle(y.begin(), y.end(), rng);
  const int64_t n = static_cast<int64_t>(y.size());
  for (int k : {2, 3}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const std::vector<int> fold = svm::stratified_folds(y.data(), n, k, 7);
    ASSERT_EQ(fold.size(), y.size());
    std::vector<int64_t> fold_size(k, 0);
    std::map<int32_t, std::vector<int>> per_class;
    for (const auto& [label, count] : sizes) per_class[label].assign(k, 0);
    for (int64_t r = 0; r < n; ++r) {
      // Each row in exactly one fold: the folds are disjoint and cover the rows.
      ASSERT_GE(fold[r], 0);
      ASSERT_LT(fold[r], k);
      ++fold_size[fold[r]];
      ++per_class[y[r]][fold[r]];
    }
    for (const auto& [label, counts] : per_class) {
      const int size = sizes.at(label);
      for (int c : counts) {
        EXPECT_GE(c, size / k) << "class " << label;
        EXPECT_LE(c, (size + k - 1) / k) << "class " << label;
      }
    }
    const auto [lo, hi] = std::minmax_element(fold_size.begin(), fold_size.end());
    EXPECT_LE(*hi - *lo, 1);
  }
}

TEST(SvmFolds, TheSeedDecidesTheFolds) {
  std::vector<int32_t> y(200);
  for (int i = 0; i < 200; ++i) y[i] = i % 4;
  const std::vector<int> a = svm::stratified_folds(y.data(), 200, 5, 1);
  EXPECT_EQ(a, svm::stratified_folds(y.data(), 200, 5, 1));
  EXPECT_NE(a, svm::stratified_folds(y.data(), 200, 5, 2));
  // Shuffled, not dealt in row order: the rows of one fold are not every 5th row of a class.
  int in_order = 0;
  for (int i = 0; i < 200; ++i) in_order += a[i] == (i / 4) % 5;
  EXPECT_LT(in_order, 100);
}

TEST(SvmFolds, CheckNamesTheSmallestClass) {
  std::vector<int32_t> y{0, 0, 0, 1, 1, 2, 2, 2, 2};
  EXPECT_NO_THROW(svm::check_cv_folds(2, y.data(), 9, {"cat", "dog", "emu"}));
  EXPECT_EQ(usage_error([&] { svm::check_cv_folds(3, y.data(), 9, {"cat", "dog", "emu"}); }),
            "--cv 3: class 1 (dog) has only 2 training rows; every fold needs one of each class, so --cv must be at most 2");
  EXPECT_EQ(usage_error([&] { svm::check_cv_folds(3, y.data(), 9, {}); }).substr(0, 40),
            "--cv 3: class 1 has only 2 training rows");
  EXPECT_EQ(usage_error([&] { svm::check_cv_folds(1, y.data(), 9, {}); }), "--cv must be at least 2 folds, not 1");
  EXPECT_THROW(svm::stratified_folds(y.data(), 9, 1, 0), std::invalid_argument);
}

TEST(SvmGammaSpec, MultiplesOfScaleAndErrors) {
  Data d = make_data(60, 5, 3, 1, 1.0);
  const double scale = svm::gamma_scale(d.X.data(), d.n, d.dim);
  EXPECT_EQ(svm::resolve_gamma("scale", d.X.data(), d.n, d.dim), scale);
  EXPECT_EQ(svm::resolve_gamma("1x", d.X.data(), d.n, d.dim), scale);
  EXPECT_EQ(svm::resolve_gamma("0.5x", d.X.data(), d.n, d.dim), 0.5 * scale);
  EXPECT_EQ(svm::resolve_gamma("2x", d.X.data(), d.n, d.dim), 2 * scale);
  EXPECT_EQ(svm::resolve_gamma("1e-1x", d.X.data(), d.n, d.dim), 0.1 * scale);
  EXPECT_EQ(svm::resolve_gamma("auto", d.X.data(), d.n, d.dim), 1.0 / 5);
  EXPECT_EQ(svm::resolve_gamma("0.25", d.X.data(), d.n, d.dim), 0.25);
  const svm::GammaSpec g = svm::parse_gamma_spec("0.5x");
  EXPECT_EQ(g.kind, svm::GammaSpec::Kind::scale);
  EXPECT_EQ(g.value, 0.5);
  EXPECT_EQ(svm::parse_gamma_spec("3").kind, svm::GammaSpec::Kind::number);
  const std::string bad = "--gamma must be 'scale', 'auto', a multiple of scale such as '0.5x', or a number > 0, not '";
  for (const char* spec : {"x", "fast", "", "2xx", "x2", "nanx", "infx", " 2x", "2 x", "scalex"})
    EXPECT_EQ(usage_error([&] { svm::parse_gamma_spec(spec); }), bad + spec + "'") << spec;
  for (const char* spec : {"0x", "-1x", "0", "-0.5"})
    EXPECT_EQ(usage_error([&] { svm::parse_gamma_spec(spec); }), std::string("--gamma must be > 0, not ") + spec);
}

TEST(SvmGridLists, ParseAndRefuse) {
  EXPECT_EQ(svm::parse_C_list("10"), (std::vector<double>{10}));
  EXPECT_EQ(svm::parse_C_list("0.1,1,1e2"), (std::vector<double>{0.1, 1, 100}));
  EXPECT_EQ(svm::parse_gamma_list("scale,auto,0.5x,2x,0.01"),
            (std::vector<std::string>{"scale", "auto", "0.5x", "2x", "0.01"}));
  EXPECT_EQ(usage_error([] { svm::parse_C_list("1,,10"); }), "--C has an empty item in '1,,10'");
  EXPECT_EQ(usage_error([] { svm::parse_C_list(""); }), "--C has an empty item in ''");
  EXPECT_EQ(usage_error([] { svm::parse_C_list("1,"); }), "--C has an empty item in '1,'");
  for (const char* c : {"0", "-1", "inf", "nan", "ten", "1x"})
    EXPECT_EQ(usage_error([&] { svm::parse_C_list(std::string("1,") + c); }),
              std::string("--C must be a finite number > 0 (or a comma-separated list of them), not '") + c + "'");
  EXPECT_EQ(usage_error([] { svm::parse_C_list("1,10,1.0"); }), "--C lists 1.0 twice");
  EXPECT_EQ(usage_error([] { svm::parse_gamma_list("scale,2x,scale"); }), "--gamma lists scale twice");
  EXPECT_EQ(usage_error([] { svm::parse_gamma_list("scale,fast"); }).substr(0, 17), "--gamma must be '");
}

// The table: shape, each cell the pooled accuracy of its folds, each fold a plain Classifier
// fit on the other folds (scaler, gamma and mask from the training folds alone) predicting
// the held-out rows, and the refit of the best pair equal to a plain fit on all rows.
TEST(SvmGrid, TableIsTheFoldsAccuracyAndTheBestPairIsRefitted) {
  Data d = make_data(240, 6, 3, 5, 1.3);
  // A feature constant over all rows but one: dropped in folds without that row, kept otherwise.
  for (int64_t r = 0; r < d.n; ++r) d.X[r * d.dim + 5] = r == 17 ? 4.0f : 0.5f;
  const std::vector<double> C{0.1, 1, 100};
  const std::vector<std::string> gamma{"scale", "auto", "4x"};
  const int k = 4;
  svm::ClassifierParams params;
  params.tol = 1e-4;
  const std::vector<float> X0 = d.X;
  const svm::ModelSelection s = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, params, C, gamma, k, 3,
                                                    cae::Device::cpu);
  EXPECT_EQ(d.X, X0);  // read, not changed
  ASSERT_EQ(s.cv_accuracy.size(), C.size() * gamma.size());
  ASSERT_EQ(s.fold_accuracy.size(), C.size() * gamma.size() * k);
  ASSERT_EQ(s.gamma_resolved.size(), gamma.size() * k);
  EXPECT_EQ(s.folds, k);
  EXPECT_EQ(s.C, C);
  EXPECT_EQ(s.gamma, gamma);

  // Every fold by hand, for every cell.
  const std::vector<int> fold = svm::stratified_folds(d.y.data(), d.n, k, 3);
  for (size_t c = 0; c < C.size(); ++c)
    for (size_t g = 0; g < gamma.size(); ++g) {
      int64_t right_total = 0;
      for (int f = 0; f < k; ++f) {
        std::vector<float> tr, te;
        std::vector<int32_t> ytr, yte;
        for (int64_t r = 0; r < d.n; ++r) {
          auto& X = fold[r] == f ? te : tr;
          X.insert(X.end(), X0.begin() + r * d.dim, X0.begin() + (r + 1) * d.dim);
          (fold[r] == f ? yte : ytr).push_back(d.y[r]);
        }
        svm::ClassifierParams p = params;
        p.C = C[c];
        p.gamma = gamma[g];
        svm::Classifier clf;
        clf.fit(tr.data(), ytr.data(), static_cast<int64_t>(ytr.size()), d.dim, p, cae::Device::cpu);
        EXPECT_EQ(s.gamma_resolved[g * k + f], clf.resolved_gamma());
        const std::vector<int32_t> pred = svm_test::predict(clf, te.data(), static_cast<int64_t>(yte.size()));
        int64_t right = 0;
        for (size_t i = 0; i < yte.size(); ++i) right += pred[i] == yte[i];
        right_total += right;
        EXPECT_EQ(s.fold_accuracy[(c * gamma.size() + g) * k + f], static_cast<double>(right) / yte.size());
      }
      EXPECT_EQ(s.cv_accuracy[c * gamma.size() + g], static_cast<double>(right_total) / d.n);
    }
  for (int f = 0; f < k; ++f) EXPECT_EQ(s.gamma_resolved[1 * k + f], 1.0 / d.dim);  // auto
  // 4x is 4 × scale on the same fold's scaled rows.
  for (int f = 0; f < k; ++f) EXPECT_DOUBLE_EQ(s.gamma_resolved[2 * k + f], 4 * s.gamma_resolved[0 * k + f]);

  // The best cell: the largest accuracy, the first in C-major order.
  const size_t best = static_cast<size_t>(std::max_element(s.cv_accuracy.begin(), s.cv_accuracy.end()) -
                                          s.cv_accuracy.begin());
  EXPECT_EQ(static_cast<size_t>(s.best_C), best / gamma.size());
  EXPECT_EQ(static_cast<size_t>(s.best_gamma), best % gamma.size());
  EXPECT_EQ(s.best_accuracy(), s.cv_accuracy[best]);
  // A grid where the choice matters: C 0.1 is far too small for these overlapping classes.
  EXPECT_GT(*std::max_element(s.cv_accuracy.begin(), s.cv_accuracy.end()),
            *std::min_element(s.cv_accuracy.begin(), s.cv_accuracy.end()));

  // svm::train with a search: the same table, then the best pair on all rows — the same
  // model as a plain fit.
  std::vector<float> X1 = X0, X2 = X0;
  int selected_calls = 0;
  svm::TrainPlan plan;
  plan.params = params;
  plan.C = C;
  plan.gamma = gamma;
  plan.cv_folds = k;
  plan.seed = 3;
  svm::TrainProgress progress;
  int fits = 0;
  progress.cv = [&](int done, int total) {
    EXPECT_EQ(done, ++fits);
    EXPECT_EQ(total, static_cast<int>(C.size() * gamma.size()) * k);
  };
  progress.selected = [&](const svm::ModelSelection& sel) {
    ++selected_calls;
    EXPECT_EQ(sel.cv_accuracy, s.cv_accuracy);
  };
  svm::Classifier chosen = svm::train(X1.data(), d.y.data(), d.n, d.dim, plan, cae::Device::cpu, progress).classifier;
  EXPECT_EQ(selected_calls, 1);
  EXPECT_EQ(fits, static_cast<int>(C.size() * gamma.size()) * k);
  svm::ClassifierParams p = params;
  p.C = C[s.best_C];
  p.gamma = gamma[s.best_gamma];
  svm::Classifier plain;
  plain.fit(X2.data(), d.y.data(), d.n, d.dim, p, cae::Device::cpu);
  EXPECT_EQ(chosen.file().C, C[s.best_C]);
  EXPECT_EQ(chosen.file().gamma_spec, gamma[s.best_gamma]);
  EXPECT_EQ(chosen.model().gamma, plain.model().gamma);
  EXPECT_EQ(chosen.model().support_vectors, plain.model().support_vectors);
  EXPECT_EQ(chosen.model().dual_coef, plain.model().dual_coef);
  EXPECT_EQ(chosen.model().rho, plain.model().rho);
  EXPECT_EQ(chosen.model_selection().cv_accuracy, s.cv_accuracy);
  EXPECT_EQ(chosen.model_selection().fold_accuracy, s.fold_accuracy);
  EXPECT_TRUE(plain.model_selection().empty());

  // Saved and read back with the model.
  char dir[] = "/tmp/test_model_selection_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5";
  chosen.set_class_names({"a", "b", "c"});
  {
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    chosen.save(w);
    w.close();
  }
  const svm::Classifier back = svm::Classifier::load(h5);
  const svm::ModelSelection& b = back.model_selection();
  EXPECT_EQ(b.folds, k);
  EXPECT_EQ(b.seed, 3u);
  EXPECT_EQ(b.C, C);
  EXPECT_EQ(b.gamma, gamma);
  EXPECT_EQ(b.cv_accuracy, s.cv_accuracy);
  EXPECT_EQ(b.fold_accuracy, s.fold_accuracy);
  EXPECT_EQ(b.gamma_resolved, s.gamma_resolved);
  EXPECT_EQ(b.best_C, s.best_C);
  EXPECT_EQ(b.best_gamma, s.best_gamma);
  EXPECT_EQ(b.scoring, svm::Scoring::accuracy);
  EXPECT_EQ(b.cv_score, s.cv_accuracy);  // accuracy: the pooled table chooses
  EXPECT_EQ(b.fold_score, s.fold_accuracy);
  EXPECT_EQ(b.image_fold, std::vector<int32_t>(fold.begin(), fold.end()));

  // A file written before --cv-scoring (no scoring, scores or folds): it chose by accuracy.
  {
    const hid_t file = H5Fopen(h5.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    EXPECT_GE(H5Adelete_by_name(file, "/model_selection", "scoring", H5P_DEFAULT), 0);
    for (const char* name : {"/model_selection/cv_score", "/model_selection/fold_score", "/model_selection/image_fold"})
      EXPECT_GE(H5Ldelete(file, name, H5P_DEFAULT), 0) << name;
    H5Fclose(file);
  }
  const svm::ModelSelection old = svm::Classifier::load(h5).model_selection();
  EXPECT_EQ(old.scoring, svm::Scoring::accuracy);
  EXPECT_EQ(old.cv_score, s.cv_accuracy);
  EXPECT_EQ(old.fold_score, s.fold_accuracy);
  EXPECT_TRUE(old.image_fold.empty());
  unlink(h5.c_str());
  rmdir(dir);
}

// --cv-scoring on an imbalanced set: accuracy (pooled) and macro-F1 (mean over the folds)
// choose different cells. Every number of the tables is recomputed here from the
// out-of-fold predictions of hand-made folds, with the metrics written out above.
TEST(SvmGridScoring, AccuracyAndMacroF1ChooseDifferentCellsOnAnImbalancedSet) {
  const Data d = make_imbalanced({150, 24, 12}, 3, 5, 0.8);
  const std::vector<double> C{0.1, 1, 10, 100};
  const std::vector<std::string> gamma{"scale", "8x"};
  const size_t nc = C.size(), ng = gamma.size();
  const int k = 3;
  svm::ClassifierParams params;
  std::map<svm::Scoring, svm::ModelSelection> by;
  for (svm::Scoring scoring : {svm::Scoring::accuracy, svm::Scoring::macro_f1, svm::Scoring::balanced_accuracy})
    by[scoring] = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, params, C, gamma, k, 11, cae::Device::cpu,
                                      {}, 1, nullptr, scoring);

  // The folds by hand: each cell's out-of-fold predictions and its folds' scores.
  const std::vector<int> fold = svm::stratified_folds(d.y.data(), d.n, k, 11);
  std::vector<double> fold_acc(nc * ng * k), fold_f1(nc * ng * k), fold_bal(nc * ng * k);
  std::vector<int64_t> right(nc * ng, 0);
  for (int f = 0; f < k; ++f) {
    std::vector<float> tr, te;
    std::vector<int32_t> ytr, yte;
    split_fold(d, fold, f, tr, ytr, te, yte);
    for (size_t c = 0; c < nc; ++c)
      for (size_t g = 0; g < ng; ++g) {
        svm::ClassifierParams p = params;
        p.C = C[c];
        p.gamma = gamma[g];
        svm::Classifier clf;
        std::vector<float> X = tr;
        clf.fit(X.data(), ytr.data(), static_cast<int64_t>(ytr.size()), d.dim, p, cae::Device::cpu);
        std::vector<float> queries = te;  // predict scales its rows in place
        const std::vector<int32_t> pred = svm_test::predict(clf, queries.data(), static_cast<int64_t>(yte.size()));
        int64_t fold_right = 0;
        for (size_t i = 0; i < yte.size(); ++i) fold_right += pred[i] == yte[i];
        const size_t at = (c * ng + g) * k + f;
        right[c * ng + g] += fold_right;
        fold_acc[at] = static_cast<double>(fold_right) / static_cast<double>(yte.size());
        fold_f1[at] = macro_f1_of(yte, pred);
        fold_bal[at] = balanced_accuracy_of(yte, pred);
      }
  }
  // The expected table of each scoring and its first best cell in C-major order.
  auto expect_table = [&](svm::Scoring scoring, const std::vector<double>& folds) -> size_t {
    SCOPED_TRACE(svm::scoring_name(scoring));
    const svm::ModelSelection& s = by.at(scoring);
    EXPECT_EQ(s.scoring, scoring);
    if (s.cv_score.size() != nc * ng || s.fold_score.size() != nc * ng * k) {
      ADD_FAILURE() << "the scores' tables have " << s.cv_score.size() << " and " << s.fold_score.size() << " cells";
      return nc * ng;
    }
    size_t best = 0;
    std::vector<double> expected(nc * ng);
    for (size_t i = 0; i < nc * ng; ++i) {
      double sum = 0;
      for (int f = 0; f < k; ++f) {
        EXPECT_NEAR(s.fold_score[i * k + f], folds[i * k + f], 1e-12) << "cell " << i << " fold " << f;
        sum += folds[i * k + f];
      }
      expected[i] = scoring == svm::Scoring::accuracy ? static_cast<double>(right[i]) / static_cast<double>(d.n)
                                                      : sum / k;
      EXPECT_NEAR(s.cv_score[i], expected[i], 1e-12) << "cell " << i;
      if (expected[i] > expected[best] + 1e-12) best = i;
      // Every scoring keeps the same accuracy table.
      EXPECT_EQ(s.cv_accuracy[i], static_cast<double>(right[i]) / static_cast<double>(d.n));
      for (int f = 0; f < k; ++f) EXPECT_EQ(s.fold_accuracy[i * k + f], fold_acc[i * k + f]);
    }
    EXPECT_EQ(s.best_cell(), best) << "C " << C[best / ng] << " gamma " << gamma[best % ng];
    EXPECT_EQ(s.best_score(), s.cv_score[best]);
    EXPECT_EQ(s.image_fold, std::vector<int32_t>(fold.begin(), fold.end()));
    return best;
  };
  const size_t by_accuracy = expect_table(svm::Scoring::accuracy, fold_acc);
  const size_t by_f1 = expect_table(svm::Scoring::macro_f1, fold_f1);
  expect_table(svm::Scoring::balanced_accuracy, fold_bal);
  // The case the option exists for: the pair with the best accuracy is not the best at the
  // small classes.
  EXPECT_NE(by_accuracy, by_f1);
  EXPECT_GT(fold_f1[by_f1 * k] + fold_f1[by_f1 * k + 1] + fold_f1[by_f1 * k + 2],
            fold_f1[by_accuracy * k] + fold_f1[by_accuracy * k + 1] + fold_f1[by_accuracy * k + 2]);
}

// On a group the cells' confusion matrices (and log-losses) travel between the ranks: two
// ranks give the table, scores and choice of one process exactly.
TEST(SvmGridScoring, AGroupOfTwoGivesTheTableOfOneProcess) {
  const Data d = make_imbalanced({90, 30, 15}, 4, 8, 1.1);
  const std::vector<double> C{0.5, 5};
  const std::vector<std::string> gamma{"0.5x", "scale", "2x"};
  for (svm::Scoring scoring : {svm::Scoring::macro_f1, svm::Scoring::balanced_accuracy, svm::Scoring::log_loss}) {
    SCOPED_TRACE(svm::scoring_name(scoring));
    const svm::ModelSelection one = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, svm::ClassifierParams{},
                                                        C, gamma, 3, 2, cae::Device::cpu, {}, 1, nullptr, scoring);
    char tmpl[] = "/tmp/test_cv_scoring_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    std::vector<svm::ModelSelection> two(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        cae::GroupExchange g(r, 2, dir + "/cv", 60);
        svm::ClassifierParams p;
        p.group = &g;
        two[static_cast<size_t>(r)] = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, p, C, gamma, 3, 2,
                                                          cae::Device::cpu, {}, 1, nullptr, scoring);
        g.finish();
      });
    for (auto& t : ranks) t.join();
    (void)!system(("rm -rf '" + dir + "'").c_str());
    for (const svm::ModelSelection& s : two) {
      EXPECT_EQ(s.cv_score, one.cv_score);  // exact
      EXPECT_EQ(s.fold_score, one.fold_score);
      EXPECT_EQ(s.cv_accuracy, one.cv_accuracy);
      EXPECT_EQ(s.best_C, one.best_C);
      EXPECT_EQ(s.best_gamma, one.best_gamma);
    }
    const auto [lo, hi] = std::minmax_element(one.cv_score.begin(), one.cv_score.end());
    EXPECT_LT(*lo, *hi);  // the cells differ: a choice was made
    if (scoring == svm::Scoring::log_loss) {
      EXPECT_LT(*hi, 0.0);   // a negated log-loss
      EXPECT_GT(*hi, -1.0);  // better than a uniform guess, -log(1/3) = -1.1
    } else {
      EXPECT_GT(*hi, 0.5);
    }
  }
}

// svm::train stopped in the probability folds under one scoring and resumed under another
// that chooses another pair: the grid's cells are replayed, the probability folds (of the
// first pair) are computed again for the new one, and the model is the uninterrupted run's.
TEST(SvmGridScoring, AResumeThatChoosesAnotherPairRecomputesTheProbabilityFolds) {
  const Data d = make_imbalanced({150, 24, 12}, 3, 5, 0.8);
  svm::TrainPlan plan;
  plan.C = {0.1, 1, 10, 100};
  plan.gamma = {"scale", "8x"};
  plan.cv_folds = 3;
  plan.probability_folds = 4;
  plan.seed = 11;
  auto train = [&](svm::Scoring scoring, svm::TrainUnits* units) {
    svm::TrainPlan p = plan;
    p.cv_scoring = scoring;
    p.units = units;
    std::vector<float> X = d.X;
    return svm::train(X.data(), d.y.data(), d.n, d.dim, p, cae::Device::cpu);
  };
  svm::TrainUnits units;
  units.probability.stop_requested = [calls = 0]() mutable { return calls++ >= 2; };
  const svm::Trained stopped = train(svm::Scoring::accuracy, &units);
  ASSERT_TRUE(stopped.interrupted);
  ASSERT_EQ(units.cv.finished.size(), 3u * plan.gamma.size());
  ASSERT_EQ(units.probability.finished.size(), 2u);
  const std::string first_pair = units.probability.computed_for;

  units.probability.stop_requested = nullptr;
  units.probability.stopped = false;
  const svm::Trained resumed = train(svm::Scoring::macro_f1, &units);
  const svm::Trained straight = train(svm::Scoring::macro_f1, nullptr);
  ASSERT_FALSE(resumed.interrupted);
  EXPECT_NE(units.probability.computed_for, first_pair);  // another pair: the case under test
  EXPECT_EQ(units.probability.finished.size(), 4u);
  const svm::ModelFile &a = resumed.classifier.file(), &b = straight.classifier.file();
  EXPECT_EQ(a.C, b.C);
  EXPECT_EQ(a.gamma_spec, b.gamma_spec);
  ASSERT_EQ(a.prob_A.size(), 3u);
  EXPECT_EQ(a.prob_A, b.prob_A);  // exact
  EXPECT_EQ(a.prob_B, b.prob_B);
  EXPECT_EQ(a.model.dual_coef, b.model.dual_coef);
  EXPECT_EQ(a.selection.cv_score, b.selection.cv_score);
}

TEST(SvmGridScoring, TheOptionNamesWhatItTakes) {
  EXPECT_EQ(svm::cv_scoring_option("accuracy", 0), svm::Scoring::accuracy);
  EXPECT_EQ(svm::cv_scoring_option("macro_f1", 5), svm::Scoring::macro_f1);
  EXPECT_EQ(svm::cv_scoring_option("balanced_accuracy", 2), svm::Scoring::balanced_accuracy);
  EXPECT_EQ(usage_error([] { svm::cv_scoring_option("macro_f1", 0); }),
            "--cv-scoring macro_f1 needs --cv K (it chooses among the cross-validated pairs)");
  EXPECT_EQ(svm::cv_scoring_option("log_loss", 3), svm::Scoring::log_loss);
  EXPECT_EQ(usage_error([] { svm::cv_scoring_option("f1", 5); }),
            "--cv-scoring: unknown scoring 'f1' (accuracy, balanced_accuracy, macro_f1, log_loss)");
  EXPECT_EQ(usage_error([] { svm::cv_scoring_option("log_loss", 0); }),
            "--cv-scoring log_loss needs --cv K (it chooses among the cross-validated pairs)");
}

// --cv-scoring log_loss, GridSearchCV(SVC(probability=True), scoring="neg_log_loss")'s
// meaning: every (fold, C, gamma) gets the probability model of the fold's training part
// (fit_sigmoids' 5 internal folds, then the fit on the whole training part) and scores its
// held-out rows' probabilities by −log_loss; the cell's score is the mean over the folds.
// Here each fold's probability model is built by hand from the library's probability fit.
TEST(SvmGridScoring, LogLossCellsAreTheMeanOfTheFoldsLogLossOfTheirProbabilityModels) {
  const Data d = make_imbalanced({90, 45, 30}, 4, 3, 1.0);
  const std::vector<double> C{0.03, 1, 30};
  const std::vector<std::string> gamma{"scale", "0.1x", "8x"};
  const size_t nc = C.size(), ng = gamma.size();
  const int k = 3;
  const uint64_t seed = 13;
  svm::ClassifierParams params;
  const svm::ModelSelection s = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, params, C, gamma, k, seed,
                                                    cae::Device::cpu, {}, 1, nullptr, svm::Scoring::log_loss);
  const svm::ModelSelection by_accuracy = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, params, C, gamma,
                                                              k, seed, cae::Device::cpu);
  EXPECT_EQ(s.scoring, svm::Scoring::log_loss);
  ASSERT_EQ(s.fold_score.size(), nc * ng * k);
  ASSERT_EQ(s.cv_score.size(), nc * ng);
  // The same outer fits: the accuracy table is the accuracy scoring's.
  EXPECT_EQ(s.cv_accuracy, by_accuracy.cv_accuracy);
  EXPECT_EQ(s.fold_accuracy, by_accuracy.fold_accuracy);

  const std::vector<int> fold = svm::stratified_folds(d.y.data(), d.n, k, seed);
  std::vector<double> expected_fold(nc * ng * k);
  for (int f = 0; f < k; ++f) {
    std::vector<float> tr, te;
    std::vector<int32_t> ytr, yte;
    split_fold(d, fold, f, tr, ytr, te, yte);
    const int64_t ntr = static_cast<int64_t>(ytr.size()), nte = static_cast<int64_t>(yte.size());
    for (size_t c = 0; c < nc; ++c)
      for (size_t g = 0; g < ng; ++g) {
        svm::ClassifierParams p = params;
        p.C = C[c];
        p.gamma = gamma[g];
        // The probability fit of the fold's training part, seeded like the grid.
        const svm::Sigmoids sig = svm::fit_sigmoids(tr.data(), ytr.data(), ntr, d.dim, p, 5, seed, cae::Device::cpu);
        svm::Classifier clf;
        std::vector<float> X = tr;
        clf.fit(X.data(), ytr.data(), ntr, d.dim, p, cae::Device::cpu);
        ASSERT_EQ(clf.model().classes, (std::vector<int32_t>{0, 1, 2}));
        clf.set_probability(sig.A, sig.B, 5, seed);
        std::vector<float> queries = te;
        const std::vector<double> prob = clf.probabilities(clf.decision_values(queries.data(), nte), nte);
        for (int64_t i = 0; i < nte; ++i)
          EXPECT_NEAR(prob[i * 3] + prob[i * 3 + 1] + prob[i * 3 + 2], 1.0, 1e-9);
        expected_fold[(c * ng + g) * k + f] = -svm::log_loss(prob.data(), yte.data(), nte, 3);
      }
  }
  size_t best = 0;
  for (size_t i = 0; i < nc * ng; ++i) {
    double sum = 0;
    for (int f = 0; f < k; ++f) {
      EXPECT_EQ(s.fold_score[i * k + f], expected_fold[i * k + f]) << "cell " << i << " fold " << f;  // exact
      EXPECT_LT(expected_fold[i * k + f], 0.0);
      sum += expected_fold[i * k + f];
    }
    EXPECT_NEAR(s.cv_score[i], sum / k, 1e-12) << "cell " << i;
    if (s.cv_score[i] > s.cv_score[best]) best = i;
  }
  EXPECT_EQ(s.best_cell(), best);
  // The grid's cells differ in calibration by more than rounding: a choice was made.
  const auto [lo, hi] = std::minmax_element(s.cv_score.begin(), s.cv_score.end());
  EXPECT_GT(*hi - *lo, 0.05);
  EXPECT_GT(*hi, -1.0);  // better than a uniform guess, -log(1/3) = -1.1
  // The best-calibrated cell is not the most accurate one here: the scorings choose apart.
  EXPECT_NE(s.best_cell(), by_accuracy.best_cell());
  EXPECT_LT(s.cv_accuracy[s.best_cell()], by_accuracy.cv_accuracy[by_accuracy.best_cell()]);
  EXPECT_LT(s.cv_score[by_accuracy.best_cell()], s.cv_score[s.best_cell()]);

  // svm::train refits the log_loss choice, and the model file keeps the table (its scores
  // are negated log-losses, below 0) and reads it back.
  svm::TrainPlan plan;
  plan.C = C;
  plan.gamma = gamma;
  plan.cv_folds = k;
  plan.seed = seed;
  plan.cv_scoring = svm::Scoring::log_loss;
  std::vector<float> X = d.X;
  svm::Classifier chosen = svm::train(X.data(), d.y.data(), d.n, d.dim, plan, cae::Device::cpu).classifier;
  EXPECT_EQ(chosen.file().C, C[s.best_C]);
  EXPECT_EQ(chosen.file().gamma_spec, gamma[s.best_gamma]);
  char dir[] = "/tmp/test_log_loss_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5";
  {
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    chosen.save(w);
    w.close();
  }
  const svm::ModelSelection back = svm::Classifier::load(h5).model_selection();
  EXPECT_EQ(back.scoring, svm::Scoring::log_loss);
  EXPECT_EQ(back.cv_score, s.cv_score);
  EXPECT_EQ(back.fold_score, s.fold_score);
  EXPECT_EQ(back.cv_accuracy, s.cv_accuracy);
  EXPECT_EQ(back.best_cell(), s.best_cell());
  // A log_loss score above 0 is no log-loss: refused naming the file.
  {
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    svm::ModelSelection bad = s;
    bad.fold_score[1] = 0.25;
    chosen.set_model_selection(bad);
    chosen.save(w);
    w.close();
  }
  try {
    svm::Classifier::load(h5);
    ADD_FAILURE() << "a positive log_loss score was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(h5 + ": /model_selection holds a log_loss score outside [-34.54, 0]"),
              std::string::npos)
        << e.what();
  }
  unlink(h5.c_str());
  rmdir(dir);
}

// Separable classes: every cell is right everywhere, and the tie goes to the first pair.
TEST(SvmGrid, TiesGoToTheFirstPairInCMajorOrder) {
  Data d = make_data(90, 4, 3, 8, 0.02);
  const svm::ModelSelection s = svm::cross_validate(d.X.data(), d.y.data(), d.n, d.dim, svm::ClassifierParams{},
                                                    {1, 10}, {"scale", "2x"}, 3, 1, cae::Device::cpu);
  EXPECT_EQ(s.cv_accuracy, (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(s.best_C, 0);
  EXPECT_EQ(s.best_gamma, 0);
}

// svm-fit --augment flip: an image and its mirror are two rows, and they must share a fold.
TEST(SvmFolds, GroupedFoldsKeepEveryViewOfAnImageInItsFold) {
  const Data d = make_data(90, 2, 3, 21, 1.0);
  const int64_t images = d.n;
  std::vector<int32_t> y2 = d.y;  // the mirrors, with the originals' labels
  y2.insert(y2.end(), d.y.begin(), d.y.end());
  for (int k : {2, 3, 5}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const std::vector<int> fold = svm::grouped_folds(y2.data(), 2 * images, 2, k, 13);
    ASSERT_EQ(fold.size(), y2.size());
    // The images are dealt exactly as stratified_folds deals them (stratified per class)...
    const std::vector<int> by_image = svm::stratified_folds(d.y.data(), images, k, 13);
    for (int64_t i = 0; i < images; ++i) {
      EXPECT_EQ(fold[i], by_image[i]);
      // ... and the mirror of image i (row i + images) is in image i's fold.
      EXPECT_EQ(fold[i + images], fold[i]) << "image " << i;
    }
    std::vector<int> size(k, 0);
    for (int f : fold) ++size[f];
    const auto [lo, hi] = std::minmax_element(size.begin(), size.end());
    EXPECT_LE(*hi - *lo, 2);  // one image = two rows
  }
  // One view is stratified_folds itself (svm-fit without --augment keeps its folds).
  EXPECT_EQ(svm::grouped_folds(d.y.data(), images, 1, 3, 4), svm::stratified_folds(d.y.data(), images, 3, 4));
  // Rows that are not views of the same images are refused.
  EXPECT_THROW(svm::grouped_folds(y2.data(), 2 * images - 1, 2, 3, 1), std::invalid_argument);
  y2[images + 4] = (y2[4] + 1) % 3;
  EXPECT_THROW(svm::grouped_folds(y2.data(), 2 * images, 2, 3, 1), std::invalid_argument);
}

// Cross-validation over originals + mirrors: each fold is fitted on every view of its
// training images (no view of a held-out image) and scored on the held-out originals only.
// FoldSplit: fold f's training part is every view of the other folds' images, its held-out
// part the fold's first views; both in row order, gathered with their labels.
TEST(SvmFolds, FoldSplitGathersEachFoldsRowsInOrder) {
  const Data d = make_data(120, 3, 3, 41, 1.0);
  const int64_t images = d.n;
  std::vector<float> X2 = d.X;
  X2.insert(X2.end(), d.X.begin(), d.X.end());
  for (size_t i = d.X.size(); i < X2.size(); ++i) X2[i] = -X2[i];  // the "mirrors" differ from the originals
  std::vector<int32_t> y2 = d.y;
  y2.insert(y2.end(), d.y.begin(), d.y.end());
  const int k = 4;
  const std::vector<int> fold = svm::grouped_folds(y2.data(), 2 * images, 2, k, 9);
  const svm::FoldSplit split(X2.data(), y2.data(), 2 * images, d.dim, 2, k, 9);
  EXPECT_EQ(split.images(), images);
  svm::FoldRows fr;
  std::vector<int> held_count(static_cast<size_t>(images), 0);
  for (int f = 0; f < k; ++f) {
    split.rows(f, fr);
    EXPECT_GT(fr.n_held(), 0);
    EXPECT_EQ(fr.n_train() + fr.n_held() * 2, 2 * images);  // the held-out images' mirrors are in neither
    EXPECT_TRUE(std::is_sorted(fr.train_rows.begin(), fr.train_rows.end()));
    EXPECT_TRUE(std::is_sorted(fr.held_rows.begin(), fr.held_rows.end()));
    for (size_t i = 0; i < fr.train_rows.size(); ++i) {
      const int64_t r = fr.train_rows[i];
      ASSERT_NE(fold[r], f);
      EXPECT_EQ(fr.train_y[i], y2[r]);
      EXPECT_TRUE(std::equal(fr.train_X.begin() + i * d.dim, fr.train_X.begin() + (i + 1) * d.dim,
                             X2.begin() + r * d.dim));
    }
    for (size_t i = 0; i < fr.held_rows.size(); ++i) {
      const int64_t r = fr.held_rows[i];
      ASSERT_LT(r, images);
      ASSERT_EQ(fold[r], f);
      ++held_count[r];
      EXPECT_EQ(fr.held_y[i], y2[r]);
      EXPECT_TRUE(std::equal(fr.held_X.begin() + i * d.dim, fr.held_X.begin() + (i + 1) * d.dim,
                             X2.begin() + r * d.dim));
    }
  }
  for (int c : held_count) EXPECT_EQ(c, 1);  // every image held out exactly once
}

// A FoldSplit over rows picked from a larger matrix (an outer fold's training part, by row
// number) gives every fold exactly the rows a FoldSplit over those rows gathered gives.
TEST(SvmFolds, FoldSplitOverPickedRowsEqualsTheSplitOfTheGatheredRows) {
  const Data d = make_data(200, 4, 3, 43, 1.0);
  // Picked: every image but each third, originals then their mirrors (rows i + 100), as an
  // outer fold's training part of 100 images with two views lists them.
  const int64_t images = d.n / 2;
  std::vector<int64_t> picked;
  for (int view = 0; view < 2; ++view)
    for (int64_t i = 0; i < images; ++i)
      if (i % 3 != 1) picked.push_back(i + view * images);
  std::vector<int32_t> y_picked;
  std::vector<float> X_gathered;
  for (int64_t r : picked) {
    y_picked.push_back(d.y[r % images]);  // a mirror has its image's label
    X_gathered.insert(X_gathered.end(), d.X.begin() + r * d.dim, d.X.begin() + (r + 1) * d.dim);
  }
  const int64_t n = static_cast<int64_t>(picked.size());
  const int k = 5;
  const svm::FoldSplit by_number(d.X.data(), picked.data(), y_picked.data(), n, d.dim, 2, k, 17);
  const svm::FoldSplit gathered(X_gathered.data(), y_picked.data(), n, d.dim, 2, k, 17);
  EXPECT_EQ(by_number.images(), n / 2);
  svm::FoldRows a, b;
  for (int f = 0; f < k; ++f) {
    by_number.rows(f, a);
    gathered.rows(f, b);
    EXPECT_GT(a.n_held(), 0);
    EXPECT_EQ(a.train_rows, b.train_rows);
    EXPECT_EQ(a.held_rows, b.held_rows);
    EXPECT_EQ(a.train_y, b.train_y);
    EXPECT_EQ(a.held_y, b.held_y);
    EXPECT_EQ(a.train_X, b.train_X);
    EXPECT_EQ(a.held_X, b.held_X);
    // Row i of the split is d.X's row picked[i].
    for (size_t i = 0; i < a.held_rows.size(); ++i)
      EXPECT_TRUE(std::equal(a.held_X.begin() + i * d.dim, a.held_X.begin() + (i + 1) * d.dim,
                             d.X.begin() + picked[a.held_rows[i]] * d.dim));
  }
}

// --cv-scoring log_loss over originals + mirrors: each fold's probability model is fitted on
// every view of its training images (the probability folds keep an image with its mirror),
// built here by hand from the library's probability fit on the gathered rows.
TEST(SvmGridScoring, LogLossWithMirrorsFitsEachFoldsProbabilityModelOnEveryTrainingView) {
  const Data d = make_imbalanced({60, 45, 30}, 4, 23, 1.1);
  const int64_t images = d.n;
  std::vector<float> X2 = d.X;
  std::vector<int32_t> y2 = d.y;
  for (int64_t i = 0; i < images; ++i) {
    for (int f = 0; f < d.dim; ++f) X2.push_back(d.X[i * d.dim + (d.dim - 1 - f)] * 0.8f - 0.1f);
    y2.push_back(d.y[i]);
  }
  const std::vector<float> X2_before = X2;
  const std::vector<double> C{0.3, 10};
  const std::vector<std::string> gamma{"scale", "3x"};
  const int k = 3;
  const uint64_t seed = 29;
  const svm::ModelSelection s = svm::cross_validate(X2.data(), y2.data(), 2 * images, d.dim, svm::ClassifierParams{},
                                                    C, gamma, k, seed, cae::Device::cpu, {}, 2, nullptr,
                                                    svm::Scoring::log_loss);
  EXPECT_EQ(X2, X2_before);  // read, not changed
  const std::vector<int> fold = svm::stratified_folds(d.y.data(), images, k, seed);
  for (int f = 0; f < k; ++f) {
    std::vector<float> tr, te;
    std::vector<int32_t> ytr, yte;
    for (int64_t r = 0; r < 2 * images; ++r) {
      const bool held = fold[r % images] == f;
      if (held && r >= images) continue;
      (held ? te : tr).insert((held ? te : tr).end(), X2.begin() + r * d.dim, X2.begin() + (r + 1) * d.dim);
      (held ? yte : ytr).push_back(y2[r]);
    }
    const int64_t ntr = static_cast<int64_t>(ytr.size()), nte = static_cast<int64_t>(yte.size());
    for (size_t c = 0; c < C.size(); ++c)
      for (size_t g = 0; g < gamma.size(); ++g) {
        svm::ClassifierParams p;
        p.C = C[c];
        p.gamma = gamma[g];
        p.log_summary = false;
        const svm::Sigmoids sig = svm::fit_sigmoids(tr.data(), ytr.data(), ntr, d.dim, p, 5, seed, cae::Device::cpu, 2);
        std::vector<float> X = tr, queries = te;
        svm::Classifier clf;
        clf.fit(X.data(), ytr.data(), ntr, d.dim, p, cae::Device::cpu);
        clf.set_probability(sig.A, sig.B, 5, seed);
        const std::vector<double> prob = clf.probabilities(clf.decision_values(queries.data(), nte), nte);
        const double expected = -svm::log_loss(prob.data(), yte.data(), nte, 3);
        EXPECT_LT(expected, 0.0);
        EXPECT_EQ(s.fold_score[(c * gamma.size() + g) * k + f], expected) << "C " << C[c] << " gamma " << gamma[g]
                                                                          << " fold " << f;  // exact
      }
  }
}

TEST(SvmGrid, CrossValidationWithMirrorsHoldsOutWholeImages) {
  const Data d = make_data(150, 5, 3, 31, 1.2);
  const int64_t images = d.n;
  // A "mirror": the image's features reversed and shifted a little — another row, same label.
  std::vector<float> X2 = d.X;
  std::vector<int32_t> y2 = d.y;
  for (int64_t i = 0; i < images; ++i) {
    for (int f = 0; f < d.dim; ++f) X2.push_back(d.X[i * d.dim + (d.dim - 1 - f)] * 0.9f + 0.05f);
    y2.push_back(d.y[i]);
  }
  const int k = 3;
  svm::ClassifierParams params;
  const std::vector<double> C{1, 10};
  const std::vector<std::string> gamma{"scale"};
  const svm::ModelSelection s = svm::cross_validate(X2.data(), y2.data(), 2 * images, d.dim, params, C, gamma, k, 5,
                                                    cae::Device::cpu, {}, 2);
  const std::vector<int> fold = svm::stratified_folds(d.y.data(), images, k, 5);
  for (size_t c = 0; c < C.size(); ++c) {
    int64_t right_total = 0;
    for (int f = 0; f < k; ++f) {
      std::vector<float> tr, te;
      std::vector<int32_t> ytr, yte;
      for (int64_t r = 0; r < 2 * images; ++r) {
        const bool held = fold[r % images] == f;
        if (held && r >= images) continue;  // a held-out image's mirror: neither trained on nor scored
        auto& X = held ? te : tr;
        X.insert(X.end(), X2.begin() + r * d.dim, X2.begin() + (r + 1) * d.dim);
        (held ? yte : ytr).push_back(y2[r]);
      }
      svm::ClassifierParams p = params;
      p.C = C[c];
      svm::Classifier clf;
      clf.fit(tr.data(), ytr.data(), static_cast<int64_t>(ytr.size()), d.dim, p, cae::Device::cpu);
      EXPECT_EQ(clf.file().n_train, static_cast<int64_t>(ytr.size()));
      const std::vector<int32_t> pred = svm_test::predict(clf, te.data(), static_cast<int64_t>(yte.size()));
      int64_t right = 0;
      for (size_t i = 0; i < yte.size(); ++i) right += pred[i] == yte[i];
      right_total += right;
      EXPECT_EQ(s.fold_accuracy[c * k + f], static_cast<double>(right) / yte.size());
    }
    EXPECT_EQ(s.cv_accuracy[c], static_cast<double>(right_total) / images);  // over the images
  }
}

// svm-fit prepares a single fit's rows before it waits for the GPU (svm::train's `prepared`):
// the same model as train preparing them itself; folds refuse rows prepared once.
TEST(Train, RowsPreparedBeforeTheFitGiveTheSameModel) {
  const Data d = make_data(120, 6, 3, 21, 1.5);
  svm::TrainPlan plan;
  plan.C = {3.0};
  plan.gamma = {"scale"};
  plan.params.standardize = true;
  std::vector<float> X1 = d.X, X2 = d.X;
  const svm::Classifier itself = svm::train(X1.data(), d.y.data(), d.n, d.dim, plan, cae::Device::cpu).classifier;
  const svm::PreparedSet prepared(X2.data(), d.y.data(), d.n, d.dim, plan.params);
  const svm::Classifier given =
      svm::train(X2.data(), d.y.data(), d.n, d.dim, plan, cae::Device::cpu, {}, &prepared).classifier;
  EXPECT_GT(itself.model().n_sv(), 0);
  EXPECT_EQ(given.model().support_vectors, itself.model().support_vectors);
  EXPECT_EQ(given.model().dual_coef, itself.model().dual_coef);
  EXPECT_EQ(given.model().rho, itself.model().rho);
  EXPECT_EQ(given.model().gamma, itself.model().gamma);
  EXPECT_EQ(given.file().scaler.mean, itself.file().scaler.mean);
  EXPECT_EQ(X2, X1);  // scaled and compacted alike
  // svm-fit's way: the scaler fitted first (while the driver starts), then the set for the
  // device; on the CPU the same preparation, so the same model.
  std::vector<float> X3 = d.X;
  const svm::PreparedSet with_scaler(X3.data(), d.y.data(), d.n, d.dim, plan.params,
                                     svm::scaler_for(X3.data(), d.n, d.dim, plan.params), cae::Device::cpu);
  const svm::Classifier third =
      svm::train(X3.data(), d.y.data(), d.n, d.dim, plan, cae::Device::cpu, {}, &with_scaler).classifier;
  EXPECT_EQ(third.model().support_vectors, itself.model().support_vectors);
  EXPECT_EQ(third.model().dual_coef, itself.model().dual_coef);
  EXPECT_EQ(third.file().scaler.scale, itself.file().scaler.scale);
  EXPECT_EQ(X3, X1);
  plan.C = {1.0, 3.0};
  plan.cv_folds = 3;
  EXPECT_THROW(svm::train(X2.data(), d.y.data(), d.n, d.dim, plan, cae::Device::cpu, {}, &prepared),
               std::invalid_argument);
}
