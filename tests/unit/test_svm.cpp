// The CPU SVM against its definitions and against libsvm's own C API (Debian libsvm-dev),
// on small generated problems.
#include <gtest/gtest.h>
#include <libsvm/svm.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/svm.h"
#include "kernels/svm/train.h"
#include "tests/support/dense_kernel_rows.h"
#include "tests/support/libsvm_export.h"
#include "tests/support/preprocess_reference.h"
#include "tests/support/svm_problems.h"
#include "tests/support/svm_reference.h"
#include "tests/support/svm_shortcuts.h"

namespace {

using svm_test::make_problem;
using svm_test::Problem;

// libsvm's sparse rows (all features, then the −1 terminator), kept alive with the problem.
struct LibsvmData {
  std::vector<std::vector<svm_node>> rows;
  std::vector<svm_node*> ptrs;
  std::vector<double> labels;
  svm_problem prob{};
  explicit LibsvmData(const Problem& p) {
    rows.resize(p.n);
    for (int64_t i = 0; i < p.n; ++i) {
      for (int f = 0; f < p.dim; ++f) rows[i].push_back({f + 1, p.X[static_cast<size_t>(i * p.dim + f)]});
      rows[i].push_back({-1, 0.0});
      ptrs.push_back(rows[i].data());
      labels.push_back(p.y[i]);
    }
    prob.l = static_cast<int>(p.n);
    prob.y = labels.data();
    prob.x = ptrs.data();
  }
};

void quiet_libsvm(const char*) {}

struct LibsvmModel {
  svm_model* m = nullptr;
  ~LibsvmModel() {
    if (m) svm_free_and_destroy_model(&m);
  }
};

svm_parameter libsvm_params(svm::KernelType k, double C, double gamma, double eps, bool shrinking) {
  svm_parameter prm{};
  prm.svm_type = C_SVC;
  prm.kernel_type = k == svm::KernelType::rbf ? RBF : LINEAR;
  prm.gamma = gamma;
  prm.cache_size = 100;
  prm.eps = eps;
  prm.C = C;
  prm.shrinking = shrinking ? 1 : 0;
  return prm;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Compares our multiclass model with libsvm's trained on the same data.
void expect_same_model(const svm::Model& ours, const svm_model* ref, double rel) {
  const int k = static_cast<int>(ours.classes.size());
  ASSERT_EQ(ref->nr_class, k);
  for (int c = 0; c < k; ++c) {
    EXPECT_EQ(ref->label[c], ours.classes[c]);
    EXPECT_EQ(ref->nSV[c], ours.n_support[c]) << "class " << c;
  }
  ASSERT_EQ(ref->l, ours.n_sv());
  for (int64_t v = 0; v < ours.n_sv(); ++v) EXPECT_EQ(ref->sv_indices[v], ours.support_indices[v] + 1);
  const double coef_scale = max_abs(ours.dual_coef);
  for (int r = 0; r < k - 1; ++r)
    for (int64_t v = 0; v < ours.n_sv(); ++v)
      EXPECT_NEAR(ours.dual_coef[r * ours.n_sv() + v], ref->sv_coef[r][v], rel * coef_scale) << "row " << r << " sv " << v;
  for (int p = 0; p < ours.n_pairs(); ++p)
    EXPECT_NEAR(ours.rho[p], ref->rho[p], rel * std::max(1.0, std::fabs(ref->rho[p]))) << "pair " << p;
}

}  // namespace

TEST(SvmKernel, BlocksMatchTheDefinition) {
  Problem p = make_problem(150, 37, 3, 1);
  std::vector<double> norms(p.n);
  svm::cpu::row_squared_norms(p.X.data(), p.n, p.dim, norms.data());
  for (auto type : {svm::KernelType::rbf, svm::KernelType::linear}) {
    svm::cpu::KernelSpec k{type, 0.02};
    const int64_t na = 60, nb = 90;
    const float* A = p.X.data();
    const float* B = p.X.data() + na * p.dim;
    std::vector<float> block(static_cast<size_t>(na * nb)), sym(static_cast<size_t>(na * na));
    svm::cpu::kernel_block(k, A, na, norms.data(), B, nb, norms.data() + na, p.dim, block.data(), nb);
    svm::cpu::kernel_block_symmetric(k, A, na, norms.data(), p.dim, sym.data(), na);
    // Float dot products carry ~1e-7 relative error of |a|² + |b|²; rbf scales it by gamma·K ≤ gamma.
    auto tol = [&](int64_t i, int64_t j) {
      return 1e-6 * (norms[i] + norms[j]) * (type == svm::KernelType::rbf ? k.gamma : 1.0) + 1e-7;
    };
    for (int64_t i = 0; i < na; ++i) {
      for (int64_t j = 0; j < nb; ++j) {
        double ref = svm::cpu::kernel_reference(k, A + i * p.dim, B + j * p.dim, p.dim);
        ASSERT_NEAR(block[i * nb + j], ref, tol(i, na + j));
      }
      for (int64_t j = 0; j < na; ++j) {
        double ref = svm::cpu::kernel_reference(k, A + i * p.dim, A + j * p.dim, p.dim);
        ASSERT_NEAR(sym[i * na + j], ref, tol(i, j));
        ASSERT_EQ(sym[i * na + j], sym[j * na + i]);
      }
      if (type == svm::KernelType::rbf) {
        EXPECT_EQ(sym[i * na + i], 1.0f);
      }
    }
  }
}

TEST(SvmSmo, SolutionSatisfiesKktAndConstraints) {
  Problem p = make_problem(400, 12, 2, 2);
  std::vector<int8_t> ys(p.n);
  for (int i = 0; i < p.n; ++i) ys[i] = p.y[i] == 0 ? 1 : -1;
  svm::cpu::KernelSpec k{svm::KernelType::rbf, 0.05};
  auto rows = svm_test::DenseKernelRows::by_definition(k, p.X.data(), static_cast<int>(p.n), p.dim);
  for (double C : {0.5, 10.0}) {
    for (double tol : {1e-3, 1e-5}) {
      auto r = svm::cpu::solve_binary(rows, ys.data(), static_cast<int>(p.n), C, tol);
      EXPECT_FALSE(r.hit_iteration_limit);
      EXPECT_GT(r.iterations, 10);
      double balance = 0;
      int bounded = 0, free_sv = 0;
      for (int i = 0; i < p.n; ++i) {
        ASSERT_GE(r.alpha[i], 0.0);
        ASSERT_LE(r.alpha[i], C);
        balance += ys[i] * r.alpha[i];
        bounded += r.alpha[i] >= C;
        free_sv += r.alpha[i] > 0 && r.alpha[i] < C;
      }
      EXPECT_NEAR(balance, 0.0, 1e-9 * C * p.n);
      EXPECT_GT(free_sv, 0);
      if (C == 0.5) {
        EXPECT_GT(bounded, 0);  // overlapping clouds: some vectors at the bound
      }
      EXPECT_LT(svm::cpu::kkt_gap(rows, ys.data(), static_cast<int>(p.n), C, r.alpha), tol * 1.01);
      EXPECT_LT(r.objective, 0.0);
    }
  }
}

// With shrinking off, libsvm runs the same algorithm: the same model to ~1e-3 relative.
TEST(SvmFit, MatchesLibsvmMulticlassRbf) {
  svm_set_print_string_function(quiet_libsvm);
  Problem p = make_problem(600, 20, 4, 3);
  for (double tol : {1e-3, 1e-6}) {
    svm::FitParams prm;
    prm.C = 10;
    prm.gamma = 1.0 / (20 * 1.7);
    prm.tol = tol;
    svm::Model ours = svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr);
    LibsvmData data(p);
    svm_parameter lp = libsvm_params(prm.kernel, prm.C, prm.gamma, tol, false);
    LibsvmModel ref{svm_train(&data.prob, &lp)};
    if (tol < 1e-4) {
      expect_same_model(ours, ref.m, 1e-4);
    } else {
      // At libsvm's default tol the float kernel values (ours) and double ones (libsvm) may
      // let the two runs part ways near the end; the solutions still agree to ~tol.
      for (int c = 0; c < 4; ++c) EXPECT_NEAR(ref.m->nSV[c], ours.n_support[c], std::max(1.0, 0.01 * ref.m->nSV[c]));
      for (int q = 0; q < ours.n_pairs(); ++q) {
        EXPECT_NEAR(ours.rho[q], ref.m->rho[q], 1e-3 * std::max(1.0, std::fabs(ref.m->rho[q])) + tol);
      }
    }
  }
}

// libsvm's default run shrinks, so its path differs; the solution agrees within tol.
TEST(SvmFit, CloseToLibsvmWithShrinking) {
  svm_set_print_string_function(quiet_libsvm);
  Problem p = make_problem(500, 16, 3, 4);
  svm::FitParams prm;
  prm.C = 10;
  prm.gamma = 0.03;
  prm.tol = 1e-3;
  svm::Model ours = svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr);
  LibsvmData data(p);
  svm_parameter lp = libsvm_params(prm.kernel, prm.C, prm.gamma, prm.tol, true);
  LibsvmModel ref{svm_train(&data.prob, &lp)};
  EXPECT_NEAR(static_cast<double>(ref.m->l), static_cast<double>(ours.n_sv()), 0.01 * ref.m->l + 1);
  for (int q = 0; q < ours.n_pairs(); ++q) {
    EXPECT_NEAR(ours.rho[q], ref.m->rho[q], 0.02 * std::max(1.0, std::fabs(ref.m->rho[q])));
  }
}

TEST(SvmFit, MatchesLibsvmLinear) {
  svm_set_print_string_function(quiet_libsvm);
  Problem p = make_problem(300, 8, 3, 5, 2.0);
  svm::FitParams prm;
  prm.kernel = svm::KernelType::linear;
  prm.C = 0.1;
  prm.tol = 1e-6;
  svm::Model ours = svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr);
  LibsvmData data(p);
  svm_parameter lp = libsvm_params(prm.kernel, prm.C, 0, prm.tol, false);
  LibsvmModel ref{svm_train(&data.prob, &lp)};
  expect_same_model(ours, ref.m, 1e-4);
}

// Decision values and votes equal libsvm's svm_predict_values on its own model.
TEST(SvmPredict, MatchesLibsvmDecisionValuesAndVotes) {
  svm_set_print_string_function(quiet_libsvm);
  Problem p = make_problem(700, 10, 5, 6);
  const int64_t n_train = 500;
  svm::FitParams prm;
  prm.C = 3;
  prm.gamma = 0.08;
  prm.tol = 1e-6;
  svm::Model ours = svm::fit_cpu(p.X.data(), p.y.data(), n_train, p.dim, prm, nullptr);
  Problem train = p;
  train.n = n_train;
  LibsvmData data(train);
  svm_parameter lp = libsvm_params(prm.kernel, prm.C, prm.gamma, prm.tol, false);
  LibsvmModel ref{svm_train(&data.prob, &lp)};

  const int64_t n_test = p.n - n_train;
  const float* Xt = p.X.data() + n_train * p.dim;
  std::vector<double> dec(static_cast<size_t>(n_test * ours.n_pairs()));
  svm::decision_values_cpu(ours, Xt, n_test, dec.data());
  std::vector<int32_t> pred = svm::vote(ours, dec.data(), n_test);
  LibsvmData test(p);
  std::vector<double> ref_dec(ours.n_pairs());
  int same = 0;
  for (int64_t i = 0; i < n_test; ++i) {
    double label = svm_predict_values(ref.m, test.ptrs[n_train + i], ref_dec.data());
    for (int q = 0; q < ours.n_pairs(); ++q) EXPECT_NEAR(dec[i * ours.n_pairs() + q], ref_dec[q], 1e-3);
    same += static_cast<int>(label) == pred[i];
  }
  EXPECT_GE(same, n_test - 1);  // a decision value within 1e-3 of 0 may flip one vote
}

TEST(SvmPredict, VoteTiesGoToTheSmallerClass) {
  svm::Model m;
  m.classes = {2, 5, 7};
  // pairs (2,5), (2,7), (5,7): 2 beats 5, 7 beats 2, 5 beats 7 → one vote each → class 2.
  std::vector<double> dec = {1.0, -1.0, 1.0,  /* row 2: 5 wins twice */ -1.0, 1.0, 1.0};
  auto pred = svm::vote(m, dec.data(), 2);
  EXPECT_EQ(pred[0], 2);
  EXPECT_EQ(pred[1], 5);
}

// A budget too small for the pair matrix switches to the row cache: same model.
TEST(SvmFit, RowCacheModeMatchesDenseMode) {
  Problem p = make_problem(640, 24, 2, 7);
  svm::FitParams prm;
  prm.C = 10;
  prm.gamma = 0.02;
  prm.tol = 1e-4;
  prm.cache_mb = 1;  // 560² floats = 1.25 MB do not fit
  const int64_t n_train = 560;
  svm::Model rows = svm::fit_cpu(p.X.data(), p.y.data(), n_train, p.dim, prm, nullptr);
  prm.cache_mb = 64;
  svm::Model dense = svm::fit_cpu(p.X.data(), p.y.data(), n_train, p.dim, prm, nullptr);
  // A row computed alone and the same row inside a block may round differently in the last
  // bit, so compare solutions, not bits: support vectors and decisions on held-out rows.
  EXPECT_NEAR(static_cast<double>(rows.n_sv()), static_cast<double>(dense.n_sv()), 2.0);
  EXPECT_NEAR(rows.rho[0], dense.rho[0], 1e-3);
  const int64_t n_test = p.n - n_train;
  std::vector<double> d_rows(n_test), d_dense(n_test);
  svm::decision_values_cpu(rows, p.X.data() + n_train * p.dim, n_test, d_rows.data());
  svm::decision_values_cpu(dense, p.X.data() + n_train * p.dim, n_test, d_dense.data());
  for (int64_t i = 0; i < n_test; ++i) EXPECT_NEAR(d_rows[i], d_dense[i], 1e-3);
}

TEST(SvmFit, ProgressCallbackCountsPairs) {
  Problem p = make_problem(120, 5, 4, 8);
  svm::FitParams prm;
  prm.gamma = 0.2;
  std::vector<int> seen;
  svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, [&](int done, int total) {
    EXPECT_EQ(total, 6);
    seen.push_back(done);
  });
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4, 5, 6}));
}

TEST(SvmFit, RejectsASingleClassAndBadParameters) {
  Problem p = make_problem(50, 4, 1, 9);
  svm::FitParams prm;
  prm.gamma = 0.1;
  EXPECT_THROW(svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr), std::invalid_argument);
  Problem q = make_problem(50, 4, 2, 9);
  prm.C = 0;
  EXPECT_THROW(svm::fit_cpu(q.X.data(), q.y.data(), q.n, q.dim, prm, nullptr), std::invalid_argument);
  prm.C = 1;
  prm.gamma = -1;
  EXPECT_THROW(svm::fit_cpu(q.X.data(), q.y.data(), q.n, q.dim, prm, nullptr), std::invalid_argument);
}

// ---- scaling, gamma, dropped features ---------------------------------------------------------
TEST(SvmScaling, StandardScalerAndGammaScale) {
  // Column 0 varies, column 1 is constant 3.5, column 2 is constant 0.
  std::vector<float> X = {1, 3.5f, 0, 2, 3.5f, 0, 4, 3.5f, 0, 9, 3.5f, 0};
  svm::Scaler s = svm::fit_standard_scaler(X.data(), 4, 3);
  EXPECT_DOUBLE_EQ(s.mean[0], 4.0);
  EXPECT_DOUBLE_EQ(s.scale[0], std::sqrt((9.0 + 4.0 + 0.0 + 25.0) / 4.0));
  EXPECT_EQ(s.mean[1], 3.5);
  EXPECT_EQ(s.scale[1], 1.0);  // zero variance → scale 1, as StandardScaler
  EXPECT_EQ(s.scale[2], 1.0);
  svm::apply_scaler(s, X.data(), 4, 3);
  EXPECT_EQ(X[1], 0.0f);
  EXPECT_FLOAT_EQ(X[0], static_cast<float>(-3.0 / std::sqrt(9.5)));
  // Var over all 12 entries: column 0 holds 4 values of variance 1, the rest 0 → Var = 1/3.
  EXPECT_NEAR(svm::gamma_scale(X.data(), 4, 3), 1.0 / (3 * (1.0 / 3.0)), 1e-6);
  EXPECT_DOUBLE_EQ(svm::resolve_gamma("auto", X.data(), 4, 3), 1.0 / 3);
  EXPECT_DOUBLE_EQ(svm::resolve_gamma("0.25", X.data(), 4, 3), 0.25);
  EXPECT_THROW(svm::resolve_gamma("-1", X.data(), 4, 3), cae::UsageError);
  EXPECT_THROW(svm::resolve_gamma("fast", X.data(), 4, 3), cae::UsageError);

  std::vector<float> dropped;
  auto keep = svm::constant_feature_mask(X.data(), 4, 3, &dropped);
  EXPECT_EQ(keep, (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(dropped, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(svm::kept_columns(keep), (std::vector<int>{0}));
  EXPECT_EQ(svm::kept_columns({0, 1, 1, 0, 1}), (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(svm::kept_columns({0, 0}).empty());
  EXPECT_EQ(svm::compact_features(X.data(), 4, 3, keep), 1);
  EXPECT_FLOAT_EQ(X[1], static_cast<float>(-2.0 / std::sqrt(9.5)));
}

// The in-place compaction moves rows in batches on several threads (preprocess.cpp): every
// kept column of every row lands where an out-of-place copy puts it, for few and many
// dropped columns, at sizes where the batches run one row at a time and in parallel; and no
// batch writes over a row it has still to read, whatever order its threads take the rows in.
TEST(SvmScaling, CompactFeaturesInPlaceEqualsACopy) {
  for (const int dim : {9, 300, 8192})
    for (const int kept : {1, dim / 2, dim * 9 / 10, dim - 1}) {
      int64_t batches = 0;
      for (int64_t r0 = 0, n = 60000; r0 < n; ++batches) {
        const int64_t r1 = svm::compaction_batch_end(r0, n, dim, kept);
        ASSERT_GT(r1, r0);
        ASSERT_LE(r1, n);
        // Row r1 − 1's destination ends where row r0's source begins, or before; one row alone
        // moves forward within itself.
        if (r1 > r0 + 1) {
          ASSERT_LE(r1 * kept, r0 * dim) << dim << " " << kept << " " << r0;
        }
        r0 = r1;
      }
      if (kept <= dim * 9 / 10) {
        EXPECT_LT(batches, 200) << dim << " " << kept;  // parallel work, not row by row
      }
    }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  struct Case { int64_t n; int dim; int dropped; };
  for (const Case c : {Case{3000, 300, 1}, Case{5000, 512, 51}, Case{2000, 300, 150}, Case{7, 9, 4},
                       Case{4096, 256, 255}}) {
    std::vector<float> X(static_cast<size_t>(c.n) * c.dim);
    for (float& v : X) v = value(rng);
    std::vector<uint8_t> keep(c.dim, 1);
    std::vector<int> columns(c.dim);
    for (int f = 0; f < c.dim; ++f) columns[f] = f;
    std::shuffle(columns.begin(), columns.end(), rng);
    for (int i = 0; i < c.dropped; ++i) keep[columns[i]] = 0;
    std::vector<float> want;
    for (int64_t r = 0; r < c.n; ++r)
      for (int f = 0; f < c.dim; ++f)
        if (keep[f]) want.push_back(X[static_cast<size_t>(r * c.dim + f)]);
    const int dk = svm::compact_features(X.data(), c.n, c.dim, keep);
    ASSERT_EQ(dk, c.dim - c.dropped);
    X.resize(want.size());
    EXPECT_EQ(X, want) << c.n << " rows of " << c.dim << ", " << c.dropped << " dropped";
  }
}

// The fused preparation svm-fit runs gives the numbers and bytes of the steps it fuses, in
// order: scaler, scaled rows, gamma 'scale', the constant-feature mask and its values, the
// compacted rows. Constant features (a tenth, none, all but one, all), a feature whose two
// values are one float apart far from zero, and the identity scaler.
TEST(SvmScaling, PreparedRowsEqualTheStepsInTurn) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-2.f, 3.f);
  struct Case { int64_t n; int dim; int constant; bool standardize; };
  for (const Case c : {Case{3000, 300, 30, true}, Case{3000, 300, 30, false}, Case{5000, 512, 0, true},
                       Case{2000, 64, 63, true}, Case{7, 9, 4, true}, Case{1, 5, 0, true}}) {
    std::vector<float> X(static_cast<size_t>(c.n) * c.dim);
    for (float& v : X) v = std::round(value(rng) * 8.f) / 8.f;  // repeated values: zeros, ties
    std::vector<int> columns(c.dim);
    for (int f = 0; f < c.dim; ++f) columns[f] = f;
    std::shuffle(columns.begin(), columns.end(), rng);
    for (int i = 0; i < c.constant; ++i)
      for (int64_t r = 0; r < c.n; ++r) X[static_cast<size_t>(r * c.dim + columns[i])] = 0.5f * float(i % 3);
    if (c.dim > c.constant && c.n > 1) {  // a column whose two raw values differ by one float
      const int f = columns[c.constant];
      for (int64_t r = 0; r < c.n; ++r)
        X[static_cast<size_t>(r * c.dim + f)] = r % 2 ? 1.0e6f : std::nextafter(1.0e6f, 2.0e6f);
    }
    const std::vector<float> raw = X;
    std::vector<float> want = X;
    const svm::Scaler scaler = c.standardize ? svm::fit_standard_scaler(want.data(), c.n, c.dim)
                                             : svm::identity_scaler(c.dim);
    svm::apply_scaler(scaler, want.data(), c.n, c.dim);
    const double gamma = svm::gamma_scale(want.data(), c.n, c.dim);
    std::vector<float> dropped;
    const std::vector<uint8_t> keep = svm::constant_feature_mask(want.data(), c.n, c.dim, &dropped);
    const int kept = svm::compact_features(want.data(), c.n, c.dim, keep);

    const svm::PreparedRows got = svm::prepare_training_rows(X.data(), c.n, c.dim, c.standardize);
    const std::string what = std::to_string(c.n) + " rows of " + std::to_string(c.dim);
    EXPECT_EQ(got.scaler.mean, scaler.mean) << what;
    EXPECT_EQ(got.scaler.scale, scaler.scale) << what;
    EXPECT_EQ(got.gamma_scale, gamma) << what;  // the same double, not a near one
    EXPECT_EQ(got.keep, keep) << what;
    EXPECT_EQ(got.dropped_values, dropped) << what;
    ASSERT_EQ(got.kept, kept) << what;
    if (c.n > 1) {
      EXPECT_GE(kept, c.dim - c.constant - 1) << what;
    }
    const size_t rows = static_cast<size_t>(c.n) * static_cast<size_t>(kept);
    EXPECT_TRUE(std::equal(X.begin(), X.begin() + static_cast<std::ptrdiff_t>(rows), want.begin())) << what;
    // scaled_kept_rows (a GPU-prepared fit's support vectors) makes the same rows from the
    // raw ones, any of them in any order.
    if (kept > 0) {
      const std::vector<int64_t> some = {c.n - 1, 0, c.n / 2, c.n - 1};
      std::vector<float> made(some.size() * static_cast<size_t>(kept));
      svm::scaled_kept_rows(got, raw.data(), c.dim, some.data(), static_cast<int64_t>(some.size()), made.data());
      for (size_t v = 0; v < some.size(); ++v)
        EXPECT_TRUE(std::equal(made.begin() + static_cast<std::ptrdiff_t>(v * kept),
                               made.begin() + static_cast<std::ptrdiff_t>((v + 1) * kept),
                               want.begin() + static_cast<std::ptrdiff_t>(some[v] * kept)))
            << what << ", row " << some[v];
    }
  }
}

// Dropping constant features and correcting afterwards equals an SVM on all features,
// also for inputs whose dropped features are not at the training value.
TEST(SvmScaling, DroppedFeaturesLeaveDecisionValuesUnchanged) {
  Problem p = make_problem(300, 6, 3, 10);
  const int D = p.dim + 2;
  std::vector<float> full(static_cast<size_t>(p.n) * D);
  for (int64_t i = 0; i < p.n; ++i) {
    std::copy_n(p.X.data() + i * p.dim, p.dim, full.data() + i * D);
    full[i * D + p.dim] = 0.5f;  // constant in training
    full[i * D + p.dim + 1] = 0.0f;
  }
  const int64_t n_train = 200;
  std::vector<float> dropped;
  auto keep = svm::constant_feature_mask(full.data(), n_train, D, &dropped);
  ASSERT_EQ(std::count(keep.begin(), keep.end(), 0), 2);
  // Test rows: the dropped features take other values.
  for (int64_t i = n_train; i < p.n; ++i) {
    full[i * D + p.dim] = 0.5f + 0.01f * static_cast<float>(i % 9);
    full[i * D + p.dim + 1] = static_cast<float>(i % 3) * 0.2f;
  }
  svm::FitParams prm;
  prm.gamma = 0.1;
  prm.tol = 1e-6;
  svm::Model on_all = svm::fit_cpu(full.data(), p.y.data(), n_train, D, prm, nullptr);
  std::vector<float> kept_train(full.begin(), full.begin() + n_train * D);
  int dk = svm::compact_features(kept_train.data(), n_train, D, keep);
  svm::Model on_kept = svm::fit_cpu(kept_train.data(), p.y.data(), n_train, dk, prm, nullptr);
  ASSERT_EQ(on_all.n_sv(), on_kept.n_sv());

  const int64_t n_test = p.n - n_train;
  std::vector<float> test(full.begin() + n_train * D, full.end());
  std::vector<double> dec_all(static_cast<size_t>(n_test * 3)), dec_kept(dec_all.size());
  svm::decision_values_cpu(on_all, test.data(), n_test, dec_all.data());
  auto e = svm::dropped_feature_distance(test.data(), n_test, D, keep, dropped);
  EXPECT_GT(*std::max_element(e.begin(), e.end()), 0.0);
  svm::compact_features(test.data(), n_test, D, keep);
  svm::decision_values_cpu(on_kept, test.data(), n_test, dec_kept.data());
  svm::correct_for_dropped_features(on_kept, e, dec_kept.data(), n_test);
  for (size_t i = 0; i < dec_all.size(); ++i) EXPECT_NEAR(dec_kept[i], dec_all[i], 1e-4);
}

// The svm-model file round-trips, and its libsvm export loads in libsvm and predicts the same.
TEST(SvmModelFile, RoundTripAndLibsvmExport) {
  svm_set_print_string_function(quiet_libsvm);
  Problem p = make_problem(260, 5, 3, 11);
  const int D = p.dim + 1;  // plus one dropped feature with training value 0.25
  svm::ModelFile f;
  svm::FitParams prm;
  prm.gamma = 0.15;
  f.model = svm::fit_cpu(p.X.data(), p.y.data(), 200, p.dim, prm, nullptr);
  f.scaler = svm::identity_scaler(D);
  f.feature_mask.assign(D, 1);
  f.feature_mask[2] = 0;  // the dropped one sits between kept features
  f.dropped_values = {0.25f};
  f.class_names = {"a", "b", "c"};
  f.n_train = 200;

  char dir[] = "/tmp/test_svm_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5", txt = std::string(dir) + "/model.txt";
  {
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    w.set_attr("/", "format_version", int64_t{1});
    svm::write_model_file(w, f);
    w.close();
  }
  const svm::Classifier clf = svm::Classifier::load(h5);
  const svm::ModelFile& g = clf.file();
  EXPECT_EQ(g.model.support_vectors, f.model.support_vectors);
  EXPECT_EQ(g.model.dual_coef, f.model.dual_coef);
  EXPECT_EQ(g.model.rho, f.model.rho);
  EXPECT_EQ(g.model.support_indices, f.model.support_indices);
  EXPECT_EQ(g.feature_mask, f.feature_mask);
  EXPECT_EQ(g.dropped_values, f.dropped_values);
  EXPECT_EQ(g.model.gamma, f.model.gamma);
  {
    cae::AtomicOutput out(txt);
    svm::write_libsvm_model(out, clf.file());
    out.commit();
  }
  LibsvmModel ref{svm_load_model(txt.c_str())};
  ASSERT_NE(ref.m, nullptr);
  // Test rows in the full D-feature space (feature 2 at the training value or not).
  const int64_t n_test = 60;
  std::vector<float> full(static_cast<size_t>(n_test) * D);
  for (int64_t i = 0; i < n_test; ++i) {
    const float* x = p.X.data() + (200 + i) * p.dim;
    int kf = 0;
    for (int feat = 0; feat < D; ++feat) full[i * D + feat] = feat == 2 ? (i % 2 ? 0.25f : 0.9f) : x[kf++];
  }
  // The classifier takes the full rows (it scales, masks and corrects them itself).
  std::vector<float> scratch = full;
  const std::vector<double> dec = clf.decision_values(scratch.data(), n_test);
  ASSERT_EQ(dec.size(), static_cast<size_t>(n_test * 3));
  std::vector<double> ref_dec(3);
  for (int64_t i = 0; i < n_test; ++i) {
    std::vector<svm_node> row;
    for (int feat = 0; feat < D; ++feat) row.push_back({feat + 1, full[i * D + feat]});
    row.push_back({-1, 0});
    svm_predict_values(ref.m, row.data(), ref_dec.data());
    for (int q = 0; q < 3; ++q) EXPECT_NEAR(dec[i * 3 + q], ref_dec[q], 1e-5);
  }
  unlink(h5.c_str());
  unlink(txt.c_str());
  rmdir(dir);
}

// ---- the Classifier ---------------------------------------------------------------------------

// Features with constant columns (at 0 and at 2.5) and one scale per column, as an encoder's
// ReLU codes have: the classifier's scaler, gamma and mask all have work to do.
namespace {
Problem make_features(int n, unsigned seed) {
  Problem base = make_problem(n, 7, 4, seed);
  Problem p = base;
  p.dim = base.dim + 2;
  p.X.assign(static_cast<size_t>(n) * p.dim, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int f = 0; f < base.dim; ++f) p.X[i * p.dim + f] = base.X[i * base.dim + f] * static_cast<float>(1 + f) + 0.3f * f;
    p.X[i * p.dim + base.dim] = 0.0f;
    p.X[i * p.dim + base.dim + 1] = 2.5f;
  }
  return p;
}
}  // namespace

// Classifier::fit and ::decision_values run exactly the steps svm-fit and svm-eval spelled
// out before the Classifier existed, in the same order: the same bits.
TEST(SvmClassifier, FitAndPredictEqualTheChainStepByStep) {
  Problem p = make_features(420, 12);
  const int64_t n_train = 300, n_test = p.n - n_train;
  const int D = p.dim;
  // Test rows whose constant features differ from training: the correction has work to do.
  for (int64_t i = n_train; i < p.n; ++i) p.X[i * D + D - 1] = 2.5f + 0.1f * static_cast<float>(i % 4);

  svm::ClassifierParams params;
  params.C = 3;
  params.tol = 1e-4;
  std::vector<float> train(p.X.begin(), p.X.begin() + n_train * D);
  svm::Classifier clf;
  int ready_calls = 0;
  svm::FitProgress progress;
  progress.ready = [&](const svm::Classifier& c) {
    ++ready_calls;
    EXPECT_EQ(c.n_features_kept(), D - 2);
    EXPECT_GT(c.resolved_gamma(), 0.0);
  };
  clf.fit(train.data(), p.y.data(), n_train, D, params, cae::Device::cpu, progress);
  EXPECT_EQ(ready_calls, 1);

  // The chain by hand.
  std::vector<float> X(p.X.begin(), p.X.begin() + n_train * D);
  svm::Scaler scaler = svm::fit_standard_scaler(X.data(), n_train, D);
  svm::apply_scaler(scaler, X.data(), n_train, D);
  svm::FitParams prm;
  prm.C = params.C;
  prm.tol = params.tol;
  prm.gamma = svm::resolve_gamma("scale", X.data(), n_train, D);
  std::vector<float> dropped;
  const std::vector<uint8_t> keep = svm::constant_feature_mask(X.data(), n_train, D, &dropped);
  const int kept = svm::compact_features(X.data(), n_train, D, keep);
  const svm::Model ref = svm::fit_cpu(X.data(), p.y.data(), n_train, kept, prm, nullptr);

  EXPECT_EQ(clf.file().scaler.mean, scaler.mean);
  EXPECT_EQ(clf.file().scaler.scale, scaler.scale);
  EXPECT_EQ(clf.file().feature_mask, keep);
  EXPECT_EQ(clf.file().dropped_values, dropped);
  EXPECT_EQ(clf.resolved_gamma(), prm.gamma);
  EXPECT_EQ(clf.model().gamma, prm.gamma);
  EXPECT_EQ(clf.model().support_vectors, ref.support_vectors);
  EXPECT_EQ(clf.model().dual_coef, ref.dual_coef);
  EXPECT_EQ(clf.model().rho, ref.rho);
  EXPECT_EQ(clf.file().n_train, n_train);
  EXPECT_EQ(clf.file().device, "cpu");

  std::vector<float> T(p.X.begin() + n_train * D, p.X.end()), T2 = T;
  svm::apply_scaler(scaler, T.data(), n_test, D);
  const std::vector<double> e = svm::dropped_feature_distance(T.data(), n_test, D, keep, dropped);
  EXPECT_GT(*std::max_element(e.begin(), e.end()), 0.0);
  svm::compact_features(T.data(), n_test, D, keep);
  std::vector<double> dec_ref(static_cast<size_t>(n_test) * ref.n_pairs());
  svm::decision_values_cpu(ref, T.data(), n_test, dec_ref.data());
  svm::correct_for_dropped_features(ref, e, dec_ref.data(), n_test);
  const std::vector<double> dec = clf.decision_values(T2.data(), n_test);
  EXPECT_EQ(dec, dec_ref);
  EXPECT_EQ(clf.vote(dec, n_test), svm::vote(ref, dec_ref.data(), n_test));
  // And the classifier is a classifier: well above chance (4 classes) on held-out rows.
  std::vector<float> T3(p.X.begin() + n_train * D, p.X.end());
  const std::vector<int32_t> pred = svm_test::predict(clf, T3.data(), n_test);
  int64_t right = 0;
  for (int64_t i = 0; i < n_test; ++i) right += pred[i] == p.y[n_train + i];
  EXPECT_GT(static_cast<double>(right) / static_cast<double>(n_test), 0.5);
}

// save → load gives the same predictions; --scale none and a linear kernel go through too.
TEST(SvmClassifier, SaveLoadPredictsTheSame) {
  Problem p = make_features(300, 13);
  const int64_t n_train = 220, n_test = p.n - n_train;
  const int D = p.dim;
  char dir[] = "/tmp/test_svm_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5";
  for (bool standardize : {true, false})
    for (svm::KernelType kernel : {svm::KernelType::rbf, svm::KernelType::linear}) {
      SCOPED_TRACE(std::string(svm::kernel_name(kernel)) + (standardize ? " standard" : " none"));
      svm::ClassifierParams params;
      params.kernel = kernel;
      params.standardize = standardize;
      params.gamma = "auto";
      std::vector<float> train(p.X.begin(), p.X.begin() + n_train * D);
      svm::Classifier clf;
      clf.fit(train.data(), p.y.data(), n_train, D, params, cae::Device::cpu);
      clf.set_class_names({"a", "b", "c", "d"});
      EXPECT_DOUBLE_EQ(clf.resolved_gamma(), 1.0 / D);  // also for linear, whose model has none
      {
        cae::Hdf5Writer w(h5);
        w.set_attr("/", "format", "svm-model");
        clf.save(w);
        w.close();
      }
      const svm::Classifier back = svm::Classifier::load(h5);
      EXPECT_EQ(back.n_features(), D);
      EXPECT_EQ(back.file().class_names, (std::vector<std::string>{"a", "b", "c", "d"}));
      std::vector<float> a(p.X.begin() + n_train * D, p.X.end()), b = a;
      EXPECT_EQ(clf.decision_values(a.data(), n_test), back.decision_values(b.data(), n_test));
    }
  unlink(h5.c_str());
  rmdir(dir);
}

TEST(SvmClassifier, AllConstantFeaturesNameTheData) {
  std::vector<float> X(40 * 3, 1.5f);
  std::vector<int32_t> y(40);
  for (int i = 0; i < 40; ++i) y[i] = i % 2;
  svm::ClassifierParams params;
  params.data_name = "feats.h5";
  svm::Classifier clf;
  try {
    clf.fit(X.data(), y.data(), 40, 3, params, cae::Device::cpu);
    FAIL() << "fit on constant features";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "feats.h5: all 3 features are constant over the training rows");
  }
}

namespace {

// libsvm's -wi: the C of class c is C·w_c; the same model as libsvm's with the same weights.
TEST(SvmFit, ClassWeightsMatchLibsvm) {
  svm_set_print_string_function(quiet_libsvm);
  Problem p = make_problem(600, 20, 4, 5);
  svm::FitParams prm;
  prm.C = 0.1;  // small enough that the bounds bind
  prm.gamma = 1.0 / (20 * 1.7);
  prm.tol = 1e-6;
  prm.class_weight = {{0, 3.0}, {2, 0.4}, {3, 1.7}};
  const svm::Model ours = svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr);
  LibsvmData data(p);
  svm_parameter lp = libsvm_params(prm.kernel, prm.C, prm.gamma, prm.tol, false);
  int weight_label[] = {0, 2, 3};
  double weight[] = {3.0, 0.4, 1.7};
  lp.nr_weight = 3;
  lp.weight_label = weight_label;
  lp.weight = weight;
  LibsvmModel ref{svm_train(&data.prob, &lp)};
  expect_same_model(ours, ref.m, 1e-4);

  // The weights matter: class 0's coefficients pass the unweighted bound C, up to 3C; class
  // 2's stay within 0.4 C in every pair.
  prm.class_weight.clear();
  const svm::Model plain = svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr);
  EXPECT_NE(plain.dual_coef, ours.dual_coef);
  const int64_t n_sv = ours.n_sv();
  double largest0 = 0, largest2 = 0;
  const int64_t start2 = ours.n_support[0] + ours.n_support[1];
  for (int r = 0; r < 3; ++r) {
    for (int64_t v = 0; v < ours.n_support[0]; ++v) largest0 = std::max(largest0, std::fabs(ours.dual_coef[r * n_sv + v]));
    for (int64_t v = start2; v < start2 + ours.n_support[2]; ++v)
      largest2 = std::max(largest2, std::fabs(ours.dual_coef[r * n_sv + v]));
  }
  EXPECT_GT(largest0, prm.C);
  EXPECT_LE(largest0, 3.0 * prm.C);
  EXPECT_GT(largest2, 0.0);
  EXPECT_LE(largest2, 0.4 * prm.C);
}

TEST(SvmSmo, ClassBoundsHoldAndKktIsMet) {
  Problem p = make_problem(400, 12, 2, 7);
  std::vector<int8_t> ys(p.n);
  for (int i = 0; i < p.n; ++i) ys[i] = p.y[i] == 0 ? 1 : -1;
  auto rows = svm_test::DenseKernelRows::by_definition(svm::cpu::KernelSpec{svm::KernelType::rbf, 0.05}, p.X.data(),
                                                       static_cast<int>(p.n), p.dim);
  const double Cp = 2.5, Cn = 0.3, tol = 1e-5;
  const auto r = svm::cpu::solve_binary(rows, ys.data(), static_cast<int>(p.n), Cp, Cn, tol);
  int at_p = 0, at_n = 0;
  double balance = 0;
  for (int i = 0; i < p.n; ++i) {
    const double bound = ys[i] > 0 ? Cp : Cn;
    ASSERT_GE(r.alpha[i], 0.0);
    ASSERT_LE(r.alpha[i], bound);
    (ys[i] > 0 ? at_p : at_n) += r.alpha[i] >= bound;
    balance += ys[i] * r.alpha[i];
  }
  EXPECT_GT(at_n, 0);  // the small bound binds
  EXPECT_NEAR(balance, 0.0, 1e-9 * Cp * p.n);
  EXPECT_LT(svm::cpu::kkt_gap(rows, ys.data(), static_cast<int>(p.n), Cp, Cn, r.alpha), tol * 1.01);
  // Equal bounds are the unweighted solver, bit for bit.
  const auto same = svm::cpu::solve_binary(rows, ys.data(), static_cast<int>(p.n), Cp, Cp, tol);
  const auto plain = svm::cpu::solve_binary(rows, ys.data(), static_cast<int>(p.n), Cp, tol);
  EXPECT_EQ(same.alpha, plain.alpha);
  EXPECT_EQ(same.rho, plain.rho);
}

// svm-fit's default --cache-mb: half of what is left after the rows, per rank, at least 64 MB.
TEST(SvmCacheBudget, HalfTheMemoryLeftSharedByTheRanks) {
  const uint64_t gb = uint64_t{1} << 30;
  EXPECT_EQ(svm::default_cache_mb(24 * gb, 4 * gb, 1), 10 * 1024);
  EXPECT_EQ(svm::default_cache_mb(24 * gb, 4 * gb, 2), 5 * 1024);
  EXPECT_EQ(svm::default_cache_mb(24 * gb, 0, 0), 12 * 1024);   // no group counts as one rank
  EXPECT_EQ(svm::default_cache_mb(gb, 2 * gb, 1), 64);          // rows larger than the memory
  EXPECT_EQ(svm::default_cache_mb(UINT64_MAX, 0, 1), int64_t{1} << 40);  // no limit known
}

TEST(SvmClassWeights, BalancedNamesAndLabels) {
  const std::vector<int32_t> y = {0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2};
  const std::vector<std::string> names = {"cat", "dog", "owl"};
  const svm::ClassWeights balanced = svm::resolve_class_weights("balanced", y.data(), 12, names);
  ASSERT_EQ(balanced.size(), 3u);
  EXPECT_DOUBLE_EQ(balanced.at(0), 12.0 / (3 * 6));  // scikit-learn's n / (k · n_c)
  EXPECT_DOUBLE_EQ(balanced.at(1), 12.0 / (3 * 2));
  EXPECT_DOUBLE_EQ(balanced.at(2), 12.0 / (3 * 4));
  const svm::ClassWeights named = svm::resolve_class_weights("dog:2.5,2:0.25", y.data(), 12, names);
  EXPECT_EQ(named, (svm::ClassWeights{{1, 2.5}, {2, 0.25}}));
  EXPECT_EQ(svm::class_weight(named, 0), 1.0);
  EXPECT_TRUE(svm::resolve_class_weights("none", y.data(), 12, names).empty());
  for (const char* bad : {"", "dog", "dog:", "dog:0", "dog:-1", "dog:inf", "emu:2", "dog:1,dog:2", "dog:2,", ":2"})
    EXPECT_THROW(svm::resolve_class_weights(bad, y.data(), 12, names), cae::UsageError) << bad;
}

TEST(SvmClassWeights, SavedWithTheModelAndGivenAsLibsvmOptions) {
  Problem p = make_features(300, 17);
  svm::ClassifierParams params;
  params.class_weight = {{0, 3.0}, {2, 0.4}};
  params.class_weight_spec = "a:3,c:0.4";
  svm::Classifier clf;
  clf.fit(p.X.data(), p.y.data(), p.n, p.dim, params, cae::Device::cpu);
  clf.set_class_names({"a", "b", "c", "d"});
  EXPECT_EQ(svm::libsvm_weight_options(clf.file()), "-w0 3 -w2 0.40000000000000002");
  char dir[] = "/tmp/test_svm_weights_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5";
  {
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    clf.save(w);
    w.close();
  }
  const svm::Classifier back = svm::Classifier::load(h5);
  EXPECT_EQ(back.file().class_weight, (svm::ClassWeights{{0, 3.0}, {1, 1.0}, {2, 0.4}, {3, 1.0}}));
  EXPECT_EQ(back.file().class_weight_spec, "a:3,c:0.4");
  EXPECT_EQ(svm::libsvm_weight_options(back.file()), "-w0 3 -w2 0.40000000000000002");
  unlink(h5.c_str());
  rmdir(dir);
}

}  // namespace
