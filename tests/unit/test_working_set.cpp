// The working-set solver (kernels/svm/cpu/working_set.h): its optimality conditions, its
// agreement with the whole-matrix SMO and with libsvm, and a model that does not depend on
// the cache it is given.
#include <gtest/gtest.h>
#include <libsvm/svm.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/cpu/working_set.h"
#include "kernels/svm/svm.h"
#include "tests/support/dense_kernel_rows.h"
#include "tests/support/one_class_cloud.h"
#include "tests/support/svm_problems.h"
#include "tests/support/svm_reference.h"

namespace {

using svm::cpu::KernelSpec;
using svm::cpu::PointKernelRows;
using svm::cpu::WorkingSetOptions;
using svm::cpu::WorkingSetStats;

struct Binary {
  svm_test::Problem p;
  std::vector<int8_t> y;
  std::vector<double> norms;
};

Binary binary_problem(int n, int dim, unsigned seed, double spread = 1.2) {
  Binary b;
  b.p = svm_test::make_problem(n, dim, 2, seed, spread);
  b.y.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) b.y[i] = b.p.y[i] == 0 ? 1 : -1;
  b.norms.resize(static_cast<size_t>(n));
  svm::cpu::row_squared_norms(b.p.X.data(), n, dim, b.norms.data());
  return b;
}

// The dense rows the working-set solver's source computes (row by row), for the KKT check.
svm_test::DenseKernelRows rows_as_computed(PointKernelRows& src) {
  const int n = src.size();
  std::vector<int> all(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) all[t] = t;
  std::vector<float> m(static_cast<size_t>(n) * n);
  src.compute(all.data(), n, m.data());
  for (int t = 0; t < n; ++t) m[static_cast<size_t>(t) * n + t] = static_cast<float>(src.diag(t));
  return svm_test::DenseKernelRows::from_matrix(std::move(m), n);
}

WorkingSetOptions options(int q, int64_t cache_bytes) {
  WorkingSetOptions o;
  o.working_set_size = q;
  o.cache_bytes = cache_bytes;
  return o;
}

}  // namespace

// A kernel row computed in any batch (its size, its other rows, its place in it) is the same
// to float rounding: OpenBLAS rounds a row by its place in the block, so not always in bits.
TEST(SvmWorkingSet, AKernelRowIsTheSameInAnyBatchToFloatRounding) {
  Binary b = binary_problem(700, 37, 1);
  const KernelSpec k{svm::KernelType::rbf, 0.03};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 700, 37);
  const int target = 123;
  std::vector<float> alone(700);
  src.compute(&target, 1, alone.data());
  for (int count : {2, 5, 16, 17, 64, 129}) {
    std::vector<int> rows(static_cast<size_t>(count));
    for (int r = 0; r < count; ++r) rows[r] = (r * 53 + 7) % 700;
    const int place = count / 3;
    rows[place] = target;
    std::vector<float> out(static_cast<size_t>(count) * 700);
    src.compute(rows.data(), count, out.data());
    for (int t = 0; t < 700; ++t)
      ASSERT_NEAR(out[static_cast<size_t>(place) * 700 + t], alone[t], 4e-7f * std::max(1.0f, std::fabs(alone[t])))
          << "batch of " << count << ", column " << t;
  }
}

TEST(SvmWorkingSet, SelectionTakesTheLargestViolatorsOfEachSide) {
  // y = +1, +1, −1, −1, +1, −1; C = 1; alpha: 0, 1, 0, 1, 0.5, 0.5.
  const std::vector<int8_t> y{1, 1, -1, -1, 1, -1};
  const std::vector<double> alpha{0, 1, 0, 1, 0.5, 0.5}, Cs(6, 1.0);
  const std::vector<double> G{-1.0, -0.2, -3.0, 0.4, -0.5, 2.0};
  // I_up (−yG): t0 1.0, t3 0.4, t4 0.5, t5 2.0. I_low (yG): t1 −0.2, t2 3.0, t4 −0.5, t5 −2.0.
  EXPECT_EQ(svm::cpu::select_working_set(y.data(), G.data(), alpha.data(), Cs.data(), 6, 2),
            (std::vector<int>{2, 5}));
  EXPECT_EQ(svm::cpu::select_working_set(y.data(), G.data(), alpha.data(), Cs.data(), 6, 4),
            (std::vector<int>{0, 1, 2, 5}));
  // Kept variables come first; the fresh ones fill the rest, half from I_up.
  std::vector<int> fresh;
  EXPECT_EQ(svm::cpu::select_working_set(y.data(), G.data(), alpha.data(), Cs.data(), 6, 4, {3, 4}, &fresh),
            (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(fresh, (std::vector<int>{5, 2}));
  // q = 6: the rest of each list in order, every variable once.
  EXPECT_EQ(svm::cpu::select_working_set(y.data(), G.data(), alpha.data(), Cs.data(), 6, 6),
            (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(SvmWorkingSet, SolutionMeetsKktAndTheBoxForSmallWorkingSets) {
  Binary b = binary_problem(500, 10, 2);
  const KernelSpec k{svm::KernelType::rbf, 0.05};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 500, 10);
  auto dense = rows_as_computed(src);
  for (int q : {2, 16, 64}) {
    for (auto [Cp, Cn] : {std::pair<double, double>{10.0, 10.0}, {0.5, 2.0}}) {
      for (double tol : {1e-3, 1e-5}) {
        WorkingSetStats st;
        const auto r = svm::cpu::solve_binary_working_set(src, b.y.data(), Cp, Cn, tol, options(q, 0), &st);
        EXPECT_FALSE(r.hit_iteration_limit);
        EXPECT_GT(st.rounds, 1) << "q " << q;
        double balance = 0;
        for (int i = 0; i < 500; ++i) {
          ASSERT_GE(r.alpha[i], 0.0);
          ASSERT_LE(r.alpha[i], b.y[i] > 0 ? Cp : Cn);
          balance += b.y[i] * r.alpha[i];
        }
        EXPECT_NEAR(balance, 0.0, 1e-9 * 500 * std::max(Cp, Cn));
        // The gap recomputed from kernel rows made in other batches (their last bits differ:
        // working_set.h) may exceed tol by the gradient's float noise, ~1e-7 of C.
        EXPECT_LT(svm::cpu::kkt_gap(dense, b.y.data(), 500, Cp, Cn, r.alpha), tol * 1.01 + 1e-6 * std::max(Cp, Cn))
            << "q " << q << " Cp " << Cp << " tol " << tol;
      }
    }
  }
}

// The same optimum as the whole-matrix SMO: the dual's objective to ~tol, the same rho and
// decisions; at a tight tolerance the same support vectors.
TEST(SvmWorkingSet, SameOptimumAsTheWholeMatrixSolver) {
  Binary b = binary_problem(600, 12, 3);
  const KernelSpec k{svm::KernelType::rbf, 0.04};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 600, 12);
  auto dense = rows_as_computed(src);
  for (double C : {1.0, 10.0}) {
    const auto smo = svm::cpu::solve_binary(dense, b.y.data(), 600, C, 1e-6);
    const auto ws = svm::cpu::solve_binary_working_set(src, b.y.data(), C, C, 1e-6, options(32, 0));
    EXPECT_NEAR(ws.objective, smo.objective, 1e-6 * std::fabs(smo.objective));
    EXPECT_NEAR(ws.rho, smo.rho, 1e-4);
    int differ = 0;
    for (int t = 0; t < 600; ++t) {
      differ += (ws.alpha[t] > 0) != (smo.alpha[t] > 0);
      EXPECT_NEAR(ws.alpha[t], smo.alpha[t], 1e-3 * C) << t;
    }
    EXPECT_LE(differ, 2) << "C " << C;
  }
}

// The optimum does not depend on the cache: none beyond the working set (every row
// recomputed each round it is chosen), a little, or every row — each stops at tol, with the
// same objective, support vectors and multipliers to the tolerance's precision.
TEST(SvmWorkingSet, TheSameOptimumForAnyCacheSize) {
  Binary b = binary_problem(900, 9, 4);
  const KernelSpec k{svm::KernelType::rbf, 0.06};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 900, 9);
  WorkingSetStats none_st, all_st;
  const auto none = svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 0), &none_st);
  const auto some = svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 100 * 900 * 4));
  const auto all = svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 900 * 900 * 4), &all_st);
  auto dense = rows_as_computed(src);
  for (const auto* r : {&none, &some, &all}) {
    EXPECT_LT(svm::cpu::kkt_gap(dense, b.y.data(), 900, 10.0, r->alpha), 1e-3 * 1.01 + 1e-5);
    EXPECT_NEAR(r->objective, none.objective, 1e-4 * std::fabs(none.objective));
    EXPECT_NEAR(r->rho, none.rho, 1e-3);
    int differ = 0;
    for (int t = 0; t < 900; ++t) {
      differ += (r->alpha[t] > 0) != (none.alpha[t] > 0);
      EXPECT_NEAR(r->alpha[t], none.alpha[t], 1e-2 * 10.0) << t;
    }
    EXPECT_LE(differ, 3);
  }
  EXPECT_GT(none_st.rows_computed, 3 * all_st.rows_computed);  // most rounds' rows recomputed
  EXPECT_LE(all_st.rows_computed, 900);                          // each row at most once
}

// A linear kernel (the diagonal is |x|², not 1) and the one-class problem (linear term 0,
// libsvm's start, y all +1) through the same rounds.
TEST(SvmWorkingSet, LinearKernelAndOneClassMeetKkt) {
  Binary b = binary_problem(400, 8, 5, 2.0);
  PointKernelRows lin(KernelSpec{svm::KernelType::linear, 0}, b.p.X.data(), b.norms.data(), 400, 8);
  auto lin_dense = rows_as_computed(lin);
  const auto r = svm::cpu::solve_binary_working_set(lin, b.y.data(), 0.5, 0.5, 1e-4, options(16, 0));
  EXPECT_LT(svm::cpu::kkt_gap(lin_dense, b.y.data(), 400, 0.5, r.alpha), 1.01e-4);

  const int n = 500, dim = 6;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 9);
  std::vector<double> norms(n);
  svm::cpu::row_squared_norms(X.data(), n, dim, norms.data());
  PointKernelRows oc(KernelSpec{svm::KernelType::rbf, 0.2}, X.data(), norms.data(), n, dim);
  auto oc_dense = rows_as_computed(oc);
  const std::vector<int8_t> ones(n, 1);
  const auto ws = svm::cpu::solve_dual_working_set(oc, ones.data(), 1, 1, 1e-6, 0.0, svm::cpu::one_class_start(n, 0.3),
                                                   options(32, 0));
  EXPECT_LT(svm::cpu::kkt_gap_one_class(oc_dense, n, ws.alpha), 1.01e-6);
  double sum = 0;
  for (double a : ws.alpha) sum += a;
  EXPECT_NEAR(sum, 0.3 * n, 1e-9 * n);
  const auto smo = svm::cpu::solve_one_class(oc_dense, n, 0.3, 1e-6);
  EXPECT_NEAR(ws.rho, smo.rho, 1e-5);
}

// svm::fit_cpu with a --cache-mb below every pair's matrix: the working sets give libsvm's
// model (shrinking off, tight tol: the same support vectors and coefficients to 1e-4).
TEST(SvmWorkingSet, AFitBeyondTheCacheMatchesLibsvm) {
  svm_set_print_string_function([](const char*) {});
  const svm_test::Problem p = svm_test::make_problem(600, 20, 3, 3);
  svm::FitParams prm;
  prm.C = 10;
  prm.gamma = 1.0 / (20 * 1.7);
  prm.tol = 1e-6;
  prm.cache_mb = 1;  // pairs of ~400 rows: 0.6 MB each; the working set's 400 rows take it all
  prm.log_summary = false;
  const svm::Model ours = svm::fit_cpu(p.X.data(), p.y.data(), p.n, p.dim, prm, nullptr);
  std::vector<std::vector<svm_node>> rows(p.n);
  std::vector<svm_node*> ptrs;
  std::vector<double> labels;
  for (int64_t i = 0; i < p.n; ++i) {
    for (int f = 0; f < p.dim; ++f) rows[i].push_back({f + 1, p.X[static_cast<size_t>(i * p.dim + f)]});
    rows[i].push_back({-1, 0.0});
    ptrs.push_back(rows[i].data());
    labels.push_back(p.y[i]);
  }
  svm_problem prob{static_cast<int>(p.n), labels.data(), ptrs.data()};
  svm_parameter lp{};
  lp.svm_type = C_SVC;
  lp.kernel_type = RBF;
  lp.gamma = prm.gamma;
  lp.cache_size = 100;
  lp.eps = prm.tol;
  lp.C = prm.C;
  lp.shrinking = 0;
  svm_model* ref = svm_train(&prob, &lp);
  ASSERT_EQ(ref->l, ours.n_sv());
  for (int c = 0; c < 3; ++c) EXPECT_EQ(ref->nSV[c], ours.n_support[c]);
  double scale = 0;
  for (double v : ours.dual_coef) scale = std::max(scale, std::fabs(v));
  for (int r = 0; r < 2; ++r)
    for (int64_t v = 0; v < ours.n_sv(); ++v)
      EXPECT_NEAR(ours.dual_coef[r * ours.n_sv() + v], ref->sv_coef[r][v], 1e-4 * scale);
  for (int q = 0; q < 3; ++q) EXPECT_NEAR(ours.rho[q], ref->rho[q], 1e-4 * std::max(1.0, std::fabs(ref->rho[q])));
  svm_free_and_destroy_model(&ref);
}
