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

// Shrinking as the solver's default unless a test says which.
WorkingSetOptions options(int q, int64_t cache_bytes, bool shrinking = WorkingSetOptions{}.shrinking) {
  WorkingSetOptions o;
  o.working_set_size = q;
  o.cache_bytes = cache_bytes;
  o.shrinking = shrinking;
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

// Rows over some columns (a shrunk problem's active set) are the whole rows' columns, to
// float rounding: in one chunk of gathered columns (dim 40) and in several (dim 16,384).
TEST(SvmWorkingSet, RowsOverChosenColumnsAreTheWholeRowsColumns) {
  for (int dim : {40, 16384}) {
    Binary b = binary_problem(900, dim, 13);
    PointKernelRows src(KernelSpec{svm::KernelType::rbf, 0.8 / dim}, b.p.X.data(), b.norms.data(), 900, dim);
    std::vector<int> rows, cols;
    for (int t = 0; t < 900; t += 17) rows.push_back(t);
    for (int t = 3; t < 900; t += 2) cols.push_back(t);
    const int count = static_cast<int>(rows.size()), ncols = static_cast<int>(cols.size());
    std::vector<float> whole(static_cast<size_t>(count) * 900), part(static_cast<size_t>(count) * ncols);
    src.compute(rows.data(), count, whole.data());
    src.compute_columns(rows.data(), count, cols.data(), ncols, part.data());
    int sizeable = 0;
    for (int r = 0; r < count; ++r)
      for (int j = 0; j < ncols; ++j) {
        const float w = whole[static_cast<size_t>(r) * 900 + cols[j]];
        sizeable += w > 0.05f;
        ASSERT_NEAR(part[static_cast<size_t>(r) * ncols + j], w, 4e-7f * std::max(1.0f, std::fabs(w)))
            << "dim " << dim << ": " << r << " " << j;
      }
    EXPECT_GT(sizeable, count * ncols / 10) << "dim " << dim;  // kernel values, not all near 0
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

// Shrinking on and off (working_set.h): both stop with the gap over all n variables within
// tol, at the whole-matrix SMO's optimum, with class weights too; on, variables do leave the
// active set and are brought back for the final test.
TEST(SvmWorkingSet, ShrinkingOnAndOffReachTheSameOptimum) {
  Binary b = binary_problem(800, 10, 6);
  const KernelSpec k{svm::KernelType::rbf, 0.05};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 800, 10);
  auto dense = rows_as_computed(src);
  for (auto [Cp, Cn] : {std::pair<double, double>{10.0, 10.0}, {1.0, 1.0}, {0.5, 4.0}}) {
    const double tol = 1e-5;
    const auto smo = svm::cpu::solve_binary(dense, b.y.data(), 800, Cp, Cn, tol);
    WorkingSetStats off_st, on_st;
    const auto off = svm::cpu::solve_binary_working_set(src, b.y.data(), Cp, Cn, tol, options(32, 0, false), &off_st);
    const auto on = svm::cpu::solve_binary_working_set(src, b.y.data(), Cp, Cn, tol, options(32, 0, true), &on_st);
    EXPECT_EQ(off_st.shrunk, 0);
    EXPECT_EQ(off_st.reconstructions, 0);
    EXPECT_GT(on_st.shrunk, 100) << "Cp " << Cp;  // most of 800 lie at a bound for good
    EXPECT_EQ(on_st.unshrunk, on_st.shrunk);      // every one back for the final test
    EXPECT_GE(on_st.reconstructions, 1);
    EXPECT_LT(on_st.kernel_values, off_st.kernel_values) << "Cp " << Cp;
    for (const auto* r : {&off, &on}) {
      EXPECT_FALSE(r->hit_iteration_limit);
      double balance = 0;
      for (int i = 0; i < 800; ++i) {
        ASSERT_GE(r->alpha[i], 0.0);
        ASSERT_LE(r->alpha[i], b.y[i] > 0 ? Cp : Cn);
        balance += b.y[i] * r->alpha[i];
      }
      EXPECT_NEAR(balance, 0.0, 1e-9 * 800 * std::max(Cp, Cn));
      EXPECT_LT(svm::cpu::kkt_gap(dense, b.y.data(), 800, Cp, Cn, r->alpha), tol * 1.01 + 1e-6 * std::max(Cp, Cn))
          << "Cp " << Cp << (r == &on ? " shrinking" : "");
      EXPECT_NEAR(r->objective, smo.objective, 1e-6 * std::fabs(smo.objective));
      EXPECT_NEAR(r->rho, smo.rho, 1e-3);
      int differ = 0;
      for (int t = 0; t < 800; ++t) {
        differ += (r->alpha[t] > 0) != (smo.alpha[t] > 0);
        EXPECT_NEAR(r->alpha[t], smo.alpha[t], 1e-2 * std::max(Cp, Cn)) << t;
      }
      EXPECT_LE(differ, 3) << "Cp " << Cp;
    }
  }
}

// A problem where the rule shrinks variables too early (C 100, a small working set): the
// rebuild finds some whose true gradient lets them join a violating pair, brings them back,
// and the rounds go on to the optimum shrinking off reaches.
TEST(SvmWorkingSet, TheUnshrinkBringsBackVariablesShrunkTooEarly) {
  Binary b = binary_problem(800, 10, 8);
  const KernelSpec k{svm::KernelType::rbf, 0.05};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 800, 10);
  auto dense = rows_as_computed(src);
  const double C = 100, tol = 1e-3;
  WorkingSetStats st;
  const auto off = svm::cpu::solve_binary_working_set(src, b.y.data(), C, C, tol, options(16, 0, false));
  const auto on = svm::cpu::solve_binary_working_set(src, b.y.data(), C, C, tol, options(16, 0, true), &st);
  // Whether a variable comes back depends on the rounding of the path (it does in the plain
  // build, not under the sanitizers' code generation); the rebuilds and the optimum do not.
  if (st.brought_back == 0) std::printf("no variable brought back on this build's path\n");
  EXPECT_GE(st.reconstructions, 2);
  EXPECT_LT(svm::cpu::kkt_gap(dense, b.y.data(), 800, C, on.alpha), tol * 1.01 + 1e-6 * C);
  EXPECT_NEAR(on.objective, off.objective, 1e-4 * std::fabs(off.objective));
  EXPECT_NEAR(on.rho, off.rho, 1e-2);
}

// Shrinking with no cache beyond the working set (every round's rows computed again, over the
// active set), some, and every row (computed whole, each once): the same optimum as shrinking
// off to the tolerance.
TEST(SvmWorkingSet, ShrinkingReachesTheSameOptimumForAnyCacheSize) {
  Binary b = binary_problem(900, 9, 4);
  const KernelSpec k{svm::KernelType::rbf, 0.06};
  PointKernelRows src(k, b.p.X.data(), b.norms.data(), 900, 9);
  auto dense = rows_as_computed(src);
  const auto off = svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 0, false));
  WorkingSetStats none_st, all_st;
  const auto none = svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 0, true), &none_st);
  const auto some = svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 100 * 900 * 4, true));
  const auto all =
      svm::cpu::solve_binary_working_set(src, b.y.data(), 10, 10, 1e-3, options(64, 900 * 900 * 4, true), &all_st);
  for (const auto* r : {&none, &some, &all}) {
    EXPECT_LT(svm::cpu::kkt_gap(dense, b.y.data(), 900, 10.0, r->alpha), 1e-3 * 1.01 + 1e-5);
    EXPECT_NEAR(r->objective, off.objective, 1e-4 * std::fabs(off.objective));
    EXPECT_NEAR(r->rho, off.rho, 1e-3);
    int differ = 0;
    for (int t = 0; t < 900; ++t) {
      differ += (r->alpha[t] > 0) != (off.alpha[t] > 0);
      EXPECT_NEAR(r->alpha[t], off.alpha[t], 1e-2 * 10.0) << t;
    }
    EXPECT_LE(differ, 3);
  }
  EXPECT_GT(none_st.shrunk, 0);
  EXPECT_GT(all_st.shrunk, 0);
  EXPECT_LE(all_st.rows_computed, 900);  // whole rows, each at most once, whatever A was
}

// The one-class problem (linear term 0 from libsvm's start, y all +1) with shrinking: the
// start's multipliers sit at the bounds, so the rule has work from the first rounds.
TEST(SvmWorkingSet, OneClassWithShrinkingMeetsKkt) {
  const int n = 700, dim = 6;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 11);
  std::vector<double> norms(n);
  svm::cpu::row_squared_norms(X.data(), n, dim, norms.data());
  PointKernelRows oc(KernelSpec{svm::KernelType::rbf, 0.2}, X.data(), norms.data(), n, dim);
  auto oc_dense = rows_as_computed(oc);
  const std::vector<int8_t> ones(n, 1);
  const auto smo = svm::cpu::solve_one_class(oc_dense, n, 0.3, 1e-6);
  for (bool shrinking : {false, true}) {
    WorkingSetStats st;
    const auto ws = svm::cpu::solve_dual_working_set(oc, ones.data(), 1, 1, 1e-6, 0.0, svm::cpu::one_class_start(n, 0.3),
                                                     options(32, 0, shrinking), &st);
    EXPECT_EQ(st.shrunk > 0, shrinking);
    EXPECT_LT(svm::cpu::kkt_gap_one_class(oc_dense, n, ws.alpha), 1.01e-6) << shrinking;
    double sum = 0;
    for (double a : ws.alpha) sum += a;
    EXPECT_NEAR(sum, 0.3 * n, 1e-9 * n);
    EXPECT_NEAR(ws.rho, smo.rho, 1e-5);
    EXPECT_NEAR(ws.objective, smo.objective, 1e-6 * std::fabs(smo.objective));
  }
}

// Shrinking on and off against libsvm's two-class fit at a tight tolerance (class weights
// 1 and 3): the same support vectors and multipliers to 1e-4 of C.
TEST(SvmWorkingSet, ShrinkingOnAndOffMatchLibsvm) {
  svm_set_print_string_function([](const char*) {});
  Binary b = binary_problem(500, 12, 12);
  const double gamma = 0.04, Cp = 2.0, Cn = 6.0, tol = 1e-6;
  PointKernelRows src(KernelSpec{svm::KernelType::rbf, gamma}, b.p.X.data(), b.norms.data(), 500, 12);
  std::vector<std::vector<svm_node>> rows(500);
  std::vector<svm_node*> ptrs;
  std::vector<double> labels;
  for (int i = 0; i < 500; ++i) {
    for (int f = 0; f < 12; ++f) rows[i].push_back({f + 1, b.p.X[static_cast<size_t>(i * 12 + f)]});
    rows[i].push_back({-1, 0.0});
    ptrs.push_back(rows[i].data());
    labels.push_back(b.y[i]);
  }
  svm_problem prob{500, labels.data(), ptrs.data()};
  int weight_label[2] = {1, -1};
  double weight[2] = {Cp, Cn};
  svm_parameter lp{};
  lp.svm_type = C_SVC;
  lp.kernel_type = RBF;
  lp.gamma = gamma;
  lp.cache_size = 100;
  lp.eps = tol;
  lp.C = 1.0;
  lp.nr_weight = 2;
  lp.weight_label = weight_label;
  lp.weight = weight;
  lp.shrinking = 1;
  svm_model* ref = svm_train(&prob, &lp);
  // libsvm's first label is its +1; alpha_t = |coefficient| of each support vector.
  std::vector<double> ref_alpha(500, 0.0);
  std::vector<int> sv(static_cast<size_t>(ref->l));
  svm_get_sv_indices(ref, sv.data());
  for (int v = 0; v < ref->l; ++v) ref_alpha[sv[v] - 1] = std::fabs(ref->sv_coef[0][v]);
  const double ref_rho = ref->label[0] == 1 ? ref->rho[0] : -ref->rho[0];
  for (bool shrinking : {false, true}) {
    WorkingSetStats st;
    const auto r = svm::cpu::solve_binary_working_set(src, b.y.data(), Cp, Cn, tol, options(32, 0, shrinking), &st);
    EXPECT_EQ(st.shrunk > 0, shrinking);
    int n_sv = 0;
    for (int t = 0; t < 500; ++t) {
      n_sv += r.alpha[t] > 0;
      EXPECT_NEAR(r.alpha[t], ref_alpha[t], 1e-4 * Cn) << t << (shrinking ? " shrinking" : "");
    }
    EXPECT_EQ(n_sv, ref->l) << shrinking;
    EXPECT_NEAR(r.rho, ref_rho, 1e-4) << shrinking;
  }
  svm_free_and_destroy_model(&ref);
}
