// The one-class SVM (svm::fit_one_class_cpu, svm::cpu::solve_one_class) against libsvm's
// C API with svm_type ONE_CLASS on the same rows.
#include <gtest/gtest.h>
#include <libsvm/svm.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/atomic_output.h"
#include "common/hdf5_io.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/libsvm_format.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/svm.h"
#include "tests/support/dense_kernel_rows.h"
#include "tests/support/libsvm_export.h"
#include "tests/support/one_class_cloud.h"
#include "tests/support/svm_reference.h"

namespace {

struct LibsvmRows {
  std::vector<std::vector<svm_node>> rows;
  std::vector<svm_node*> ptrs;
  LibsvmRows(const std::vector<float>& X, int n, int dim) {
    rows.resize(n);
    for (int i = 0; i < n; ++i) {
      for (int f = 0; f < dim; ++f) rows[i].push_back({f + 1, X[static_cast<size_t>(i) * dim + f]});
      rows[i].push_back({-1, 0.0});
    }
    for (auto& r : rows) ptrs.push_back(r.data());
  }
};

void quiet(const char*) {}

svm_parameter one_class_params(double nu, double gamma, double eps) {
  svm_parameter prm{};
  prm.svm_type = ONE_CLASS;
  prm.kernel_type = RBF;
  prm.gamma = gamma;
  prm.nu = nu;
  prm.cache_size = 100;
  prm.eps = eps;
  prm.shrinking = 0;
  return prm;
}

}  // namespace

TEST(SvmOneClass, StartIsLibsvms) {
  const std::vector<double> a = svm::cpu::one_class_start(10, 0.37);
  double sum = 0;
  for (int t = 0; t < 10; ++t) {
    sum += a[t];
    if (t < 3) {
      EXPECT_EQ(a[t], 1.0);
    } else if (t == 3) {
      EXPECT_NEAR(a[t], 0.7, 1e-12);
    } else {
      EXPECT_EQ(a[t], 0.0);
    }
  }
  EXPECT_NEAR(sum, 3.7, 1e-12);
  const std::vector<double> all = svm::cpu::one_class_start(4, 1.0);
  for (double v : all) EXPECT_EQ(v, 1.0);
}

// The solution is feasible, meets the KKT conditions to tol, and has the ν-property: at most
// ν n training rows outside (multiplier 1 bounds them), at least ν n support vectors.
TEST(SvmOneClass, SolutionIsFeasibleOptimalAndHasTheNuProperty) {
  const int n = 300, dim = 8;
  const double gamma = 0.1;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 11);
  auto K = svm_test::DenseKernelRows::by_definition(svm::cpu::KernelSpec{svm::KernelType::rbf, gamma}, X.data(), n, dim);
  for (double nu : {0.05, 0.3, 0.75}) {
    for (double tol : {1e-3, 1e-6}) {
      const auto r = svm::cpu::solve_one_class(K, n, nu, tol);
      EXPECT_FALSE(r.hit_iteration_limit);
      EXPECT_GT(r.iterations, 0);
      double sum = 0;
      int n_sv = 0, at_bound = 0;
      for (int t = 0; t < n; ++t) {
        ASSERT_GE(r.alpha[t], 0.0);
        ASSERT_LE(r.alpha[t], 1.0);
        sum += r.alpha[t];
        n_sv += r.alpha[t] > 0;
        at_bound += r.alpha[t] >= 1.0;
      }
      EXPECT_NEAR(sum, nu * n, 1e-9 * n);
      EXPECT_LT(svm::cpu::kkt_gap_one_class(K, n, r.alpha), tol * 1.01);
      EXPECT_LE(at_bound, nu * n);
      EXPECT_GE(n_sv, nu * n);
      // Training rows strictly outside (f < 0) all have multiplier 1: no more than ν n.
      int outside = 0;
      for (int t = 0; t < n; ++t) {
        const float* row = K.row(t);
        double f = -r.rho;
        for (int s = 0; s < n; ++s) f += r.alpha[s] * row[s];
        if (f < -tol) {
          ++outside;
          EXPECT_GE(r.alpha[t], 1.0) << "row " << t << " f " << f;
        }
      }
      EXPECT_LE(outside, nu * n);
      EXPECT_GT(r.objective, 0.0);
    }
  }
}

// With shrinking off libsvm runs the same algorithm from the same start: the same support
// vectors, multipliers and rho, and the same predictions on new rows.
TEST(SvmOneClass, MatchesLibsvm) {
  svm_set_print_string_function(quiet);
  const int n = 400, dim = 12, n_test = 500;
  const double gamma = 1.0 / (dim * 1.3);
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 5);
  const std::vector<float> T = svm_test::one_class_cloud(n_test, dim, 6);
  LibsvmRows train(X, n, dim), test(T, n_test, dim);
  std::vector<double> labels(n, 1.0);
  svm_problem prob{};
  prob.l = n;
  prob.y = labels.data();
  prob.x = train.ptrs.data();
  for (double nu : {0.02, 0.1, 0.37, 0.9}) {
    SCOPED_TRACE("nu " + std::to_string(nu));
    const double tol = 1e-6;
    svm::FitParams p;
    p.kind = svm::SvmKind::one_class;
    p.nu = nu;
    p.gamma = gamma;
    p.tol = tol;
    p.log_summary = false;
    const svm::Model ours = svm::fit_one_class_cpu(X.data(), n, dim, p);
    ASSERT_EQ(ours.kind, svm::SvmKind::one_class);
    ASSERT_TRUE(ours.classes.empty());

    svm_parameter lp = one_class_params(nu, gamma, tol);
    ASSERT_EQ(svm_check_parameter(&prob, &lp), nullptr);
    svm_model* ref = svm_train(&prob, &lp);
    ASSERT_EQ(svm_get_svm_type(ref), ONE_CLASS);
    ASSERT_EQ(ref->l, ours.n_sv());
    ASSERT_EQ(ours.n_support, std::vector<int>{static_cast<int>(ours.n_sv())});
    EXPECT_GT(ours.n_sv(), nu * n - 1);
    for (int64_t v = 0; v < ours.n_sv(); ++v) {
      EXPECT_EQ(ref->sv_indices[v], ours.support_indices[v] + 1);
      EXPECT_NEAR(ours.dual_coef[v], ref->sv_coef[0][v], 1e-4) << "sv " << v;
      for (int f = 0; f < dim; ++f)
        ASSERT_EQ(ours.support_vectors[static_cast<size_t>(v) * dim + f], X[static_cast<size_t>(ours.support_indices[v]) * dim + f]);
    }
    EXPECT_NEAR(ours.rho[0], ref->rho[0], 1e-4 * std::max(1.0, std::fabs(ref->rho[0])));

    std::vector<double> dec(n_test);
    svm::decision_values_cpu(ours, T.data(), n_test, dec.data());
    const std::vector<int32_t> pred = svm::one_class_labels(dec.data(), n_test);
    int inside = 0, outside = 0;
    for (int i = 0; i < n_test; ++i) {
      double ref_dec = 0;
      const double ref_label = svm_predict_values(ref, test.ptrs[i], &ref_dec);
      EXPECT_NEAR(dec[i], ref_dec, 1e-4) << "row " << i;
      if (std::fabs(ref_dec) > 1e-4) {
        EXPECT_EQ(pred[i], static_cast<int32_t>(ref_label)) << "row " << i;
      }
      (pred[i] > 0 ? inside : outside) += 1;
    }
    // Both answers occur, so the comparison above tested both.
    EXPECT_GT(inside, 0);
    EXPECT_GT(outside, 0);
    svm_free_and_destroy_model(&ref);
  }
}

TEST(SvmOneClass, RowCacheModeMatchesDenseMode) {
  const int n = 600, dim = 6;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 9);
  svm::FitParams p;
  p.kind = svm::SvmKind::one_class;
  p.nu = 0.2;
  p.gamma = 0.2;
  p.log_summary = false;
  p.tol = 1e-6;
  const svm::Model dense = svm::fit_one_class_cpu(X.data(), n, dim, p);
  p.cache_mb = 1;  // 600² floats are 1.4 MB: rows on demand
  const svm::Model rows = svm::fit_one_class_cpu(X.data(), n, dim, p);
  // A row computed alone and the same row inside the symmetric block may differ in the last
  // bit, so the solutions agree to the tolerance, not bit for bit.
  ASSERT_EQ(dense.support_indices, rows.support_indices);
  for (size_t v = 0; v < dense.dual_coef.size(); ++v) EXPECT_NEAR(dense.dual_coef[v], rows.dual_coef[v], 1e-5);
  EXPECT_NEAR(dense.rho[0], rows.rho[0], 1e-5);
  const std::vector<float> T = svm_test::one_class_cloud(200, dim, 10);
  std::vector<double> d_dense(200), d_rows(200);
  svm::decision_values_cpu(dense, T.data(), 200, d_dense.data());
  svm::decision_values_cpu(rows, T.data(), 200, d_rows.data());
  for (int i = 0; i < 200; ++i) EXPECT_NEAR(d_dense[i], d_rows[i], 1e-5);
}

TEST(SvmOneClass, RejectsBadParametersAndTheOtherKind) {
  const std::vector<float> X = svm_test::one_class_cloud(20, 3, 1);
  svm::FitParams p;
  p.kind = svm::SvmKind::one_class;
  p.gamma = 0.5;
  for (double nu : {0.0, -0.1, 1.5, std::nan("")}) {
    p.nu = nu;
    EXPECT_THROW(svm::fit_one_class_cpu(X.data(), 20, 3, p), std::invalid_argument) << nu;
  }
  p.nu = 0.5;
  p.gamma = 0;
  EXPECT_THROW(svm::fit_one_class_cpu(X.data(), 20, 3, p), std::invalid_argument);
  p.gamma = 0.5;
  p.kind = svm::SvmKind::c_svc;
  EXPECT_THROW(svm::fit_one_class_cpu(X.data(), 20, 3, p), std::invalid_argument);
  // The one-vs-one fit refuses a one-class request rather than ignoring it.
  std::vector<int32_t> y(20);
  for (int i = 0; i < 20; ++i) y[i] = i % 2;
  p.kind = svm::SvmKind::one_class;
  EXPECT_THROW(svm::fit_cpu(X.data(), y.data(), 20, 3, p, nullptr), std::invalid_argument);
  EXPECT_EQ(svm::parse_kind("one-class"), svm::SvmKind::one_class);
  EXPECT_EQ(svm::parse_kind("c-svc"), svm::SvmKind::c_svc);
  EXPECT_STREQ(svm::kind_name(svm::SvmKind::one_class), "one-class");
  EXPECT_THROW(svm::parse_kind("nu-svc"), std::invalid_argument);
}

// The Classifier path svm-fit takes (scale, mask a constant feature, solve, correct), saved
// and read back with its kind and nu, and exported to libsvm's text both ways (model_file's
// writer and libsvm's own svm_save_model): svm_predict of either export gives the
// Classifier's decision values on the scaled rows.
TEST(SvmOneClass, ClassifierSavesLoadsAndExportsToLibsvm) {
  svm_set_print_string_function(quiet);
  const int n = 250, dim = 7, n_test = 120;
  std::vector<float> X = svm_test::one_class_cloud(n, dim, 21), T = svm_test::one_class_cloud(n_test, dim, 22);
  for (int i = 0; i < n; ++i) X[static_cast<size_t>(i) * dim + 4] = 2.5f;  // constant: dropped
  std::vector<int32_t> y(n, 0);
  svm::ClassifierParams params;
  params.kind = svm::SvmKind::one_class;
  params.nu = 0.2;
  params.gamma = "scale";
  params.tol = 1e-6;
  params.log_summary = false;
  std::vector<float> train = X;
  svm::Classifier clf;
  clf.fit(train.data(), y.data(), n, dim, params, cae::Device::cpu);
  ASSERT_EQ(clf.model().kind, svm::SvmKind::one_class);
  ASSERT_EQ(clf.n_features_kept(), dim - 1);
  EXPECT_EQ(clf.file().nu, 0.2);

  char dir[] = "/tmp/test_one_class_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5", ours_txt = std::string(dir) + "/ours.model",
                    libsvm_txt = std::string(dir) + "/libsvm.model";
  {
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    clf.save(w);
    w.close();
  }
  const svm::Classifier back = svm::Classifier::load(h5);
  EXPECT_EQ(back.model().kind, svm::SvmKind::one_class);
  EXPECT_EQ(back.file().nu, 0.2);
  EXPECT_EQ(back.model().dual_coef, clf.model().dual_coef);
  EXPECT_EQ(back.model().rho, clf.model().rho);
  std::vector<float> a = T, b = T;
  const std::vector<double> dec = clf.decision_values(a.data(), n_test);
  ASSERT_EQ(dec.size(), static_cast<size_t>(n_test));
  EXPECT_EQ(dec, back.decision_values(b.data(), n_test));
  const std::vector<int32_t> pred = back.vote(dec, n_test);
  EXPECT_NE(std::count(pred.begin(), pred.end(), 1), 0);
  EXPECT_NE(std::count(pred.begin(), pred.end(), -1), 0);

  {
    cae::AtomicOutput out(ours_txt);
    svm::write_libsvm_model(out, back.file());
    out.commit();
  }
  {
    cae::AtomicOutput out(libsvm_txt);
    svm::save_libsvm_model(out, back.file());
    out.commit();
  }
  std::vector<float> scaled = T;
  back.scale(scaled.data(), n_test);
  const LibsvmRows rows(scaled, n_test, dim);
  for (const std::string& path : {ours_txt, libsvm_txt}) {
    SCOPED_TRACE(path);
    svm_model* ref = svm_load_model(path.c_str());
    ASSERT_NE(ref, nullptr);
    EXPECT_EQ(svm_get_svm_type(ref), ONE_CLASS);
    EXPECT_EQ(ref->l, back.model().n_sv());
    for (int i = 0; i < n_test; ++i) {
      double ref_dec = 0;
      const double label = svm_predict_values(ref, rows.ptrs[i], &ref_dec);
      EXPECT_NEAR(ref_dec, dec[i], 1e-5) << "row " << i;
      if (std::fabs(ref_dec) > 1e-5) {
        EXPECT_EQ(static_cast<int32_t>(label), pred[i]) << "row " << i;
      }
    }
    svm_free_and_destroy_model(&ref);
  }
  for (const std::string& path : {h5, ours_txt, libsvm_txt}) unlink(path.c_str());
  rmdir(dir);
}

// A damaged one-class file is refused with the file's name, not used.
TEST(SvmOneClass, ModelFileChecksTheKind) {
  const int n = 80, dim = 3;
  std::vector<float> X = svm_test::one_class_cloud(n, dim, 31);
  std::vector<int32_t> y(n, 0);
  svm::ClassifierParams params;
  params.kind = svm::SvmKind::one_class;
  params.nu = 0.3;
  params.log_summary = false;
  svm::Classifier clf;
  clf.fit(X.data(), y.data(), n, dim, params, cae::Device::cpu);
  char dir[] = "/tmp/test_one_class_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string h5 = std::string(dir) + "/svm.h5";
  auto write_with = [&](const char* kind, double nu) {
    svm::ModelFile f = clf.file();
    f.nu = nu;
    cae::Hdf5Writer w(h5);
    w.set_attr("/", "format", "svm-model");
    svm::write_model_file(w, f);
    w.set_attr("/", "kind", kind);
    w.close();
  };
  write_with("one-class", 0.3);
  EXPECT_NO_THROW(svm::read_model_file(h5));
  for (auto [kind, nu, message] : {std::tuple<const char*, double, const char*>{"nu-svr", 0.3, "unknown kind 'nu-svr'"},
                                   {"one-class", 0.0, "attribute nu must be in (0, 1]"},
                                   {"c-svc", 0.3, "/svm/classes holds fewer than two classes"}}) {
    write_with(kind, nu);
    try {
      svm::read_model_file(h5);
      ADD_FAILURE() << kind << " " << nu << " was accepted";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(h5), std::string::npos) << what;
      EXPECT_NE(what.find(message), std::string::npos) << what;
    }
  }
  unlink(h5.c_str());
  rmdir(dir);
}
