// svm-fit --approx nystroem:M (kernels/svm/approx/nystroem.h): the landmarks' draw, the
// mapping against dense references, the least-squares solver's optimality conditions,
// determinism, the model file's round trip and its refusals of hostile files, and accuracy
// near the exact SVM's.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "common/hdf5_io.h"
#include "kernels/svm/approx/nystroem.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/train.h"
#include "tests/support/svm_problems.h"
#include "tests/support/svm_reference.h"
#include "tests/support/svm_shortcuts.h"
#include "tests/support/temp_dir.h"

namespace {

using svm_test::make_problem;
using svm_test::Problem;

// n rows of dim values uniform in ±[0.1, 2] (never 0: tests never run on all-zero data).
std::vector<float> nonzero_rows(int64_t n, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> magnitude(0.1, 2.0);
  std::vector<float> X(static_cast<size_t>(n) * dim);
  for (float& v : X) v = static_cast<float>((rng() & 1 ? 1 : -1) * magnitude(rng));
  return X;
}

double dot(const double* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Solves A x = b (A [n, n] row-major, well conditioned) by Gaussian elimination with
// partial pivoting, in double: the dense reference of K_LL⁻¹.
std::vector<double> solve_dense(std::vector<double> A, std::vector<double> b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(A[r * n + c]) > std::fabs(A[p * n + c])) p = r;
    for (size_t j = 0; j < n; ++j) std::swap(A[c * n + j], A[p * n + j]);
    std::swap(b[c], b[p]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = A[r * n + c] / A[c * n + c];
      for (size_t j = c; j < n; ++j) A[r * n + j] -= f * A[c * n + j];
      b[r] -= f * b[c];
    }
  }
  std::vector<double> x(n);
  for (size_t c = n; c-- > 0;) {
    double s = b[c];
    for (size_t j = c + 1; j < n; ++j) s -= A[c * n + j] * x[j];
    x[c] = s / A[c * n + c];
  }
  return x;
}

svm::ClassifierParams approx_params(int64_t M, uint64_t seed = 1) {
  svm::ClassifierParams params;
  params.approx.landmarks = M;
  params.approx.seed = seed;
  params.log_summary = false;
  return params;
}

double accuracy(const std::vector<int32_t>& pred, const int32_t* y) {
  int64_t right = 0;
  for (size_t i = 0; i < pred.size(); ++i) right += pred[i] == y[i];
  return static_cast<double>(right) / static_cast<double>(pred.size());
}

}  // namespace

TEST(SvmNystroem, ApproxSpecIsParsedStrictly) {
  EXPECT_EQ(svm::parse_approx_spec("nystroem:1").landmarks, 1);
  EXPECT_EQ(svm::parse_approx_spec("nystroem:4000").landmarks, 4000);
  EXPECT_EQ(svm::parse_approx_spec("nystroem:30000").landmarks, svm::kMaxLandmarks);
  for (const char* bad : {"", "nystroem", "nystroem:", "nystroem:0", "nystroem:-5", "nystroem:+5", "nystroem: 5",
                          "nystroem:5 ", "nystroem:30001", "nystroem:5x", "nystroem:1e3", "rff:5", "Nystroem:5",
                          "nystroem:99999999999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(svm::parse_approx_spec(bad), cae::UsageError);
  }
}

TEST(SvmNystroem, LandmarksAreASeededUniformSampleWithoutReplacement) {
  const std::vector<int64_t> a = svm::draw_landmarks(100, 30, 7);
  ASSERT_EQ(a.size(), 30u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::set<int64_t>(a.begin(), a.end()).size(), 30u);
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 100);
  EXPECT_EQ(svm::draw_landmarks(100, 30, 7), a);
  EXPECT_NE(svm::draw_landmarks(100, 30, 8), a);
  std::vector<int64_t> all(12);
  for (int64_t i = 0; i < 12; ++i) all[static_cast<size_t>(i)] = i;
  EXPECT_EQ(svm::draw_landmarks(12, 12, 3), all);
  // Every row as often as any other: 4,000 draws of 10 rows of 20 pick each ~2,000 times.
  std::vector<int> count(20, 0);
  for (uint64_t seed = 0; seed < 4000; ++seed)
    for (int64_t r : svm::draw_landmarks(20, 10, seed)) ++count[static_cast<size_t>(r)];
  for (int c : count) EXPECT_NEAR(c, 2000, 200);
  EXPECT_THROW(svm::draw_landmarks(5, 6, 1), std::invalid_argument);
  EXPECT_THROW(svm::draw_landmarks(5, 0, 1), std::invalid_argument);
}

// With every row a landmark the approximation is exact on the rows: φ(x_i)·φ(x_j) = K_ij.
TEST(SvmNystroem, FeaturesReproduceTheKernelWhenEveryRowIsALandmark) {
  const int64_t n = 40;
  const int dim = 6;
  const double gamma = 0.8;
  const std::vector<float> X = nonzero_rows(n, dim, 11);
  svm::ApproxSpec spec;
  spec.landmarks = n;
  const svm::NystroemModel m = svm::nystroem_map(X.data(), n, dim, gamma, spec);
  ASSERT_EQ(m.M, n);
  ASSERT_GE(m.rank, 1);
  ASSERT_LE(m.rank, n);
  std::vector<double> phi(static_cast<size_t>(n) * m.rank);
  svm::nystroem_features(m, X.data(), n, nullptr, phi.data());
  const svm::cpu::KernelSpec k{svm::KernelType::rbf, gamma};
  double worst = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double exact = svm::cpu::kernel_reference(k, X.data() + i * dim, X.data() + j * dim, dim);
      worst = std::max(worst, std::fabs(dot(phi.data() + i * m.rank, phi.data() + j * m.rank, m.rank) - exact));
    }
  EXPECT_LT(worst, 1e-4);
  for (size_t c = 1; c < m.eigenvalues.size(); ++c) EXPECT_GE(m.eigenvalues[c - 1], m.eigenvalues[c]);
  EXPECT_GE(m.eigenvalues.back(), svm::kEigenvalueFloor * m.eigenvalues.front());
}

// Rows that are not landmarks: φ(x)·φ(y) = K(x, L) K_LL⁻¹ K(L, y), K_LL⁻¹ by a dense solve
// in double; a dropped feature's distance e scales φ by exp(−γ e).
TEST(SvmNystroem, MappingMatchesADenseReference) {
  const int64_t n = 60, queries = 9;
  const int dim = 5;
  const double gamma = 0.7;
  const std::vector<float> X = nonzero_rows(n, dim, 21), Q = nonzero_rows(queries, dim, 22);
  svm::ApproxSpec spec;
  spec.landmarks = 24;
  spec.seed = 5;
  const svm::NystroemModel m = svm::nystroem_map(X.data(), n, dim, gamma, spec);
  ASSERT_EQ(m.landmarks->size(), static_cast<size_t>(24 * dim));
  for (size_t l = 0; l < 24; ++l)  // the landmarks are the drawn rows
    for (int f = 0; f < dim; ++f) EXPECT_EQ((*m.landmarks)[l * dim + f], X[m.landmark_indices[l] * dim + f]);
  ASSERT_EQ(m.landmark_indices, svm::draw_landmarks(n, 24, 5));
  ASSERT_EQ(m.rank, 24);  // γ 0.7 on 5 features keeps K_LL well conditioned
  const svm::cpu::KernelSpec k{svm::KernelType::rbf, gamma};
  const size_t M = 24;
  std::vector<double> KLL(M * M);
  for (size_t a = 0; a < M; ++a)
    for (size_t b = 0; b < M; ++b)
      KLL[a * M + b] = svm::cpu::kernel_reference(k, m.landmarks->data() + a * dim, m.landmarks->data() + b * dim, dim);
  auto k_rows = [&](const float* x) {
    std::vector<double> v(M);
    for (size_t l = 0; l < M; ++l) v[l] = svm::cpu::kernel_reference(k, x, m.landmarks->data() + l * dim, dim);
    return v;
  };
  std::vector<double> phi(static_cast<size_t>(queries) * m.rank);
  svm::nystroem_features(m, Q.data(), queries, nullptr, phi.data());
  for (int64_t i = 0; i < queries; ++i)
    for (int64_t j = 0; j < queries; ++j) {
      const std::vector<double> kx = k_rows(Q.data() + i * dim), ky = k_rows(Q.data() + j * dim);
      const std::vector<double> z = solve_dense(KLL, ky);
      const double ref = dot(kx.data(), z.data(), static_cast<int>(M));
      EXPECT_NEAR(dot(phi.data() + i * m.rank, phi.data() + j * m.rank, m.rank), ref, 1e-4) << i << " " << j;
    }
  std::vector<double> e(static_cast<size_t>(queries));
  for (int64_t i = 0; i < queries; ++i) e[static_cast<size_t>(i)] = 0.25 * static_cast<double>(i);
  std::vector<double> scaled(phi.size());
  svm::nystroem_features(m, Q.data(), queries, e.data(), scaled.data());
  for (int64_t i = 0; i < queries; ++i)
    for (int c = 0; c < m.rank; ++c)
      EXPECT_NEAR(scaled[i * m.rank + c], std::exp(-gamma * e[i]) * phi[i * m.rank + c],
                  1e-12 * (1 + std::fabs(phi[i * m.rank + c])));
}

// At the solution the gradient of Σ s_i (w·φ_i + b − t_i)² + λ‖w‖² (λ = 1/C) vanishes, for
// every class, with class weights; every C of one call equals its own call.
TEST(SvmNystroem, SolverMeetsTheRidgeOptimalityConditions) {
  Problem p = make_problem(180, 5, 3, 31);
  svm::ApproxSpec spec;
  spec.landmarks = 30;
  const svm::NystroemModel m = svm::nystroem_map(p.X.data(), p.n, p.dim, 0.3, spec);
  const std::vector<int> classes{0, 1, 2};
  const svm::ClassWeights weights{{0, 2.0}, {2, 0.5}};
  const std::vector<double> Cs{0.5, 4.0};
  const std::vector<svm::NystroemWeights> both =
      svm::fit_nystroem_classifiers(m, p.X.data(), p.y.data(), p.n, classes, weights, Cs, "rows");
  ASSERT_EQ(both.size(), 2u);
  const int r = m.rank;
  std::vector<double> phi(static_cast<size_t>(p.n) * r);
  svm::nystroem_features(m, p.X.data(), p.n, nullptr, phi.data());
  for (size_t ci = 0; ci < Cs.size(); ++ci) {
    const svm::NystroemWeights& w = both[ci];
    const std::vector<svm::NystroemWeights> alone =
        svm::fit_nystroem_classifiers(m, p.X.data(), p.y.data(), p.n, classes, weights, {Cs[ci]}, "rows");
    EXPECT_EQ(alone[0].weights, w.weights);
    EXPECT_EQ(alone[0].bias, w.bias);
    const double lambda = 1.0 / Cs[ci];
    for (int c = 0; c < 3; ++c) {
      std::vector<double> grad(static_cast<size_t>(r), 0.0), scale(static_cast<size_t>(r), 0.0);
      double grad_b = 0, scale_b = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const double s = svm::class_weight(weights, p.y[i]);
        const double t = p.y[i] == c ? 1.0 : -1.0;
        const double* f = phi.data() + i * r;
        const double e = dot(w.weights.data() + c * r, f, r) + w.bias[c] - t;
        for (int j = 0; j < r; ++j) {
          grad[j] += s * e * f[j];
          scale[j] += s * std::fabs(t * f[j]);
        }
        grad_b += s * e;
        scale_b += s;
      }
      for (int j = 0; j < r; ++j) {
        grad[j] += lambda * w.weights[c * r + j];
        EXPECT_LT(std::fabs(grad[j]), 1e-8 * (1 + scale[j])) << "class " << c << " weight " << j;
      }
      EXPECT_LT(std::fabs(grad_b), 1e-8 * scale_b) << "class " << c << " bias (unregularised)";
    }
  }
}

TEST(SvmNystroem, ASeedGivesOneModelAnotherSeedOtherLandmarks) {
  Problem p = make_problem(300, 6, 4, 41);
  auto fit = [&](uint64_t seed) {
    std::vector<float> X = p.X;
    svm::Classifier clf;
    clf.fit(X.data(), p.y.data(), p.n, p.dim, approx_params(50, seed), cae::Device::cpu);
    return clf;
  };
  const svm::Classifier a = fit(7), b = fit(7), c = fit(8);
  ASSERT_TRUE(a.is_approx());
  EXPECT_EQ(a.file().approx.landmark_indices, b.file().approx.landmark_indices);
  EXPECT_EQ(*a.file().approx.projection, *b.file().approx.projection);
  EXPECT_EQ(a.file().approx.weights, b.file().approx.weights);
  EXPECT_EQ(a.file().approx.bias, b.file().approx.bias);
  EXPECT_NE(a.file().approx.landmark_indices, c.file().approx.landmark_indices);
  EXPECT_EQ(a.file().approx.seed, 7u);
  std::vector<float> q1 = p.X, q2 = p.X;
  EXPECT_EQ(a.decision_values(q1.data(), p.n), b.decision_values(q2.data(), p.n));
}

// save → load predicts the same bits; a constant feature (dropped) that differs in the test
// rows gives the correction work; float16 landmarks go through too.
TEST(SvmNystroem, ASavedAndLoadedModelPredictsTheSame) {
  Problem base = make_problem(260, 5, 3, 51);
  const int D = base.dim + 1;
  std::vector<float> X(static_cast<size_t>(base.n) * D);
  for (int64_t i = 0; i < base.n; ++i) {
    std::copy_n(base.X.data() + i * base.dim, base.dim, X.data() + i * D);
    X[i * D + base.dim] = 1.5f;
  }
  const int64_t n_train = 200, n_test = base.n - n_train;
  for (int64_t i = n_train; i < base.n; ++i) X[i * D + base.dim] = 1.5f + 0.2f * static_cast<float>(i % 3);
  cae_test::TempDir dir("cae-nystroem");
  for (bool halves : {false, true}) {
    SCOPED_TRACE(halves ? "float16 landmarks" : "float32 landmarks");
    std::vector<float> train(X.begin(), X.begin() + n_train * D);
    svm::Classifier clf;
    clf.fit(train.data(), base.y.data(), n_train, D, approx_params(60), cae::Device::cpu);
    clf.set_class_names({"a", "b", "c"});
    if (halves) clf.keep_float16();
    EXPECT_EQ(clf.n_features_kept(), D - 1);
    const std::string path = dir.file(halves ? "half.h5" : "float.h5");
    {
      cae::Hdf5Writer w(path);
      w.set_attr("/", "format", "svm-model");
      clf.save(w);
      w.close();
    }
    const svm::Classifier back = svm::Classifier::load(path);
    ASSERT_TRUE(back.is_approx());
    EXPECT_EQ(back.file().features_dtype, halves ? "float16" : "float32");
    EXPECT_EQ(back.file().class_names, (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(back.model().classes, clf.model().classes);
    EXPECT_EQ(back.file().approx.rank, clf.file().approx.rank);
    std::vector<float> t1(X.begin() + n_train * D, X.end()), t2 = t1;
    const std::vector<double> d1 = clf.decision_values(t1.data(), n_test), d2 = back.decision_values(t2.data(), n_test);
    EXPECT_EQ(d1, d2);
    EXPECT_EQ(d1.size(), static_cast<size_t>(n_test * 3));
    EXPECT_EQ(svm::classifier_kind_name(back.file()), std::string("nystroem"));
  }
}

TEST(SvmNystroem, AccuracyNearTheExactSvmOnASeparableProblem) {
  Problem p = make_problem(700, 8, 3, 61, 0.7);
  const int64_t n_train = 500, n_test = p.n - n_train;
  const int D = p.dim;
  auto accuracy_of = [&](const svm::ClassifierParams& params) {
    std::vector<float> train(p.X.begin(), p.X.begin() + n_train * D), test(p.X.begin() + n_train * D, p.X.end());
    svm::Classifier clf;
    clf.fit(train.data(), p.y.data(), n_train, D, params, cae::Device::cpu);
    return accuracy(svm_test::predict(clf, test.data(), n_test), p.y.data() + n_train);
  };
  svm::ClassifierParams exact;
  exact.log_summary = false;
  const double exact_accuracy = accuracy_of(exact), approx_accuracy = accuracy_of(approx_params(150));
  EXPECT_GT(exact_accuracy, 0.9);
  EXPECT_GT(approx_accuracy, 0.9);
  EXPECT_NEAR(approx_accuracy, exact_accuracy, 0.03);
}

// svm::train with --cv (a C list), --probability and --class-weight on Nyström features.
TEST(SvmNystroem, CrossValidationProbabilitiesAndClassWeightsWork) {
  Problem p = make_problem(240, 5, 3, 71, 0.9);
  svm::TrainPlan plan = svm::plan_from_options("1,10", "scale", "rbf", 3, 1e-3);
  svm::plan_approx(plan, "nystroem:40", std::optional<uint64_t>(3));
  plan.probability_folds = 3;
  plan.params.log_summary = false;
  plan.params.class_weight = {{1, 2.0}};
  plan.params.class_weight_spec = "1:2";
  std::vector<float> X = p.X;
  const svm::Trained t = svm::train(X.data(), p.y.data(), p.n, p.dim, plan, cae::Device::cpu);
  const svm::Classifier& clf = t.classifier;
  ASSERT_TRUE(clf.is_approx());
  EXPECT_EQ(clf.file().approx.M, 40);
  EXPECT_EQ(clf.file().approx.seed, 3u);
  EXPECT_EQ(clf.model_selection().folds, 3);
  EXPECT_EQ(clf.model_selection().C.size(), 2u);
  ASSERT_TRUE(clf.has_probability());
  std::vector<float> q(p.X.begin(), p.X.begin() + 30 * p.dim);
  const std::vector<double> dec = clf.decision_values(q.data(), 30);
  const std::vector<double> prob = clf.probabilities(dec, 30);
  for (int64_t i = 0; i < 30; ++i) {
    double sum = 0;
    for (int c = 0; c < 3; ++c) sum += prob[i * 3 + c];
    EXPECT_NEAR(sum, 1.0, 1e-9);
  }
}

TEST(SvmNystroem, WhatItDoesNotFitIsAUsageError) {
  Problem p = make_problem(80, 4, 2, 81);
  auto fit = [&](svm::ClassifierParams params, cae::Device device) {
    std::vector<float> X = p.X;
    svm::Classifier clf;
    clf.fit(X.data(), p.y.data(), p.n, p.dim, params, device);
  };
  // The library's fit says what svm-fit says (svm::check_nystroem_fit, the one list).
  auto refusal = [&](svm::ClassifierParams params, cae::Device device) -> std::string {
    try {
      fit(params, device);
    } catch (const cae::UsageError& e) {
      return e.what();
    }
    return "(no refusal)";
  };
  EXPECT_THROW(fit(approx_params(81), cae::Device::cpu), cae::UsageError);  // more landmarks than rows
  svm::ClassifierParams linear = approx_params(10);
  linear.kernel = svm::KernelType::linear;
  EXPECT_EQ(refusal(linear, cae::Device::cpu),
            "--approx nystroem approximates the rbf kernel; --kernel linear has nothing to approximate");
  svm::ClassifierParams one_class = approx_params(10);
  one_class.kind = svm::SvmKind::one_class;
  EXPECT_EQ(refusal(one_class, cae::Device::cpu), "--approx nystroem does not fit --kind one-class");
  svm::TrainPlan plan = svm::plan_from_options("10", "scale", "rbf", 0, 1e-3);
  EXPECT_THROW(svm::plan_approx(plan, "", std::optional<uint64_t>(2)), cae::UsageError);  // a seed alone
  EXPECT_THROW(svm::plan_approx(plan, "nystroem:0", std::nullopt), cae::UsageError);
  svm::TrainPlan lin = svm::plan_from_options("10", "scale", "linear", 0, 1e-3);
  EXPECT_THROW(svm::plan_approx(lin, "nystroem:10", std::nullopt), cae::UsageError);
  svm::TrainPlan oc = svm::plan_from_options("10", "scale", "rbf", 0, 1e-3);
  svm::plan_kind(oc, "one-class", std::nullopt, "none");
  EXPECT_THROW(svm::plan_approx(oc, "nystroem:10", std::nullopt), cae::UsageError);
  EXPECT_EQ(svm::nystroem_peak_bytes(1000), uint64_t{24} * 1000 * 1000);
}

// ---- hostile model files ------------------------------------------------------------------

namespace {

// Edits of a written file through the HDF5 C API: a dataset replaced by another (shape, values;
// without the toolkit's checksums, as another writer's would be), a link removed, an attribute
// set. Each returns false when HDF5 refused.
template <typename T>
bool replace_dataset(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                     const std::vector<T>& values) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return false;
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0) H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t stored = std::is_same_v<T, double> ? H5T_IEEE_F64LE : std::is_same_v<T, float> ? H5T_IEEE_F32LE : H5T_STD_I64LE;
  const hid_t memory = std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : std::is_same_v<T, float> ? H5T_NATIVE_FLOAT
                                                                                                  : H5T_NATIVE_INT64;
  const hid_t ds = H5Dcreate2(file, name.c_str(), stored, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const bool ok = ds >= 0 && H5Dwrite(ds, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0;
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(file);
  return ok;
}
bool replace_doubles(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                     const std::vector<double>& values) {
  return replace_dataset(path, name, dims, values);
}

bool remove_link(const std::string& path, const std::string& name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return false;
  const bool ok = H5Ldelete(file, name.c_str(), H5P_DEFAULT) >= 0;
  H5Fclose(file);
  return ok;
}

template <typename T>
bool set_attr(const std::string& path, const std::string& obj, const std::string& key, T value) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return false;
  const hid_t o = H5Oopen(file, obj.c_str(), H5P_DEFAULT);
  if (H5Aexists(o, key.c_str()) > 0) H5Adelete(o, key.c_str());
  const hid_t space = H5Screate(H5S_SCALAR);
  hid_t type = -1;
  const void* data = &value;
  std::string text;
  if constexpr (std::is_same_v<T, const char*>) {
    text = value;
    type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, text.size() + 1);
    data = text.c_str();
  } else {
    type = H5Tcopy(std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64);
  }
  const hid_t attr = H5Acreate2(o, key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const bool ok = attr >= 0 && H5Awrite(attr, type, data) >= 0;
  if (attr >= 0) H5Aclose(attr);
  H5Tclose(type);
  H5Sclose(space);
  H5Oclose(o);
  H5Fclose(file);
  return ok;
}

// A nystroem model of 3 classes, 4 features and 12 landmarks; its numbers for the edits.
struct GoodModel {
  std::string path;
  int64_t M = 12;
  int rank = 0, dim = 4, k = 3;
};

GoodModel write_good_model(const std::string& path) {
  Problem p = make_problem(90, 4, 3, 91);
  svm::Classifier clf;
  clf.fit(p.X.data(), p.y.data(), p.n, p.dim, approx_params(12), cae::Device::cpu);
  cae::Hdf5Writer w(path);
  w.set_attr("/", "format", "svm-model");
  clf.save(w);
  w.close();
  GoodModel g;
  g.path = path;
  g.rank = clf.file().approx.rank;
  return g;
}

}  // namespace

TEST(SvmNystroemModelFile, AGoodFileReads) {
  cae_test::TempDir dir("cae-nystroem-file");
  const GoodModel g = write_good_model(dir.file("good.h5"));
  EXPECT_EQ(svm_test::model_file_refusal(g.path), "");
  const svm::ModelFile f = svm::read_model_file(g.path);
  EXPECT_TRUE(f.is_approx());
  EXPECT_EQ(f.approx.M, 12);
  EXPECT_EQ(f.approx.classes(), 3);
  EXPECT_TRUE(f.model.support_vectors.empty());
}

TEST(SvmNystroemModelFile, HostileFilesAreRefusedNamingTheFileAndTheProblem) {
  cae_test::TempDir dir("cae-nystroem-file");
  struct Case {
    const char* what;
    std::function<bool(const GoodModel&)> edit;
    const char* says;
  };
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases{
      {"no /approx", [](const GoodModel& g) { return remove_link(g.path, "/approx"); }, "has no /approx group"},
      {"M negative", [](const GoodModel& g) { return set_attr<int64_t>(g.path, "/approx", "M", -12); },
       "M -12 is not a landmark count"},
      {"M zero", [](const GoodModel& g) { return set_attr<int64_t>(g.path, "/approx", "M", 0); },
       "M 0 is not a landmark count"},
      {"M beyond the limit", [](const GoodModel& g) { return set_attr<int64_t>(g.path, "/approx", "M", 40000); },
       "M 40000 is not a landmark count"},
      {"M against the landmarks' rows", [](const GoodModel& g) { return set_attr<int64_t>(g.path, "/approx", "M", 13); },
       "/approx/landmarks"},
      {"more landmarks than training rows",
       [](const GoodModel& g) { return set_attr<int64_t>(g.path, "/", "n_train", 10); }, "landmarks of 10 training rows"},
      {"rank beyond M", [](const GoodModel& g) { return set_attr<int64_t>(g.path, "/approx", "rank", 13); },
       "rank 13 is not in [1, M]"},
      {"landmarks of another width",
       [](const GoodModel& g) {
         return replace_doubles(g.path, "/approx/landmarks", {12, 5}, std::vector<double>(60, 0.5));
       },
       "/approx/landmarks"},
      {"landmarks NaN",
       [](const GoodModel& g) {
         std::vector<float> v(48, 0.5f);
         v[7] = std::numeric_limits<float>::quiet_NaN();
         return replace_dataset(g.path, "/approx/landmarks", {12, 4}, v);
       },
       "/approx/landmarks holds NaN or Inf"},
      {"projection NaN",
       [nan](const GoodModel& g) {
         std::vector<double> v(static_cast<size_t>(12 * g.rank), 0.1);
         v[3] = nan;
         return replace_doubles(g.path, "/approx/projection", {12, static_cast<hsize_t>(g.rank)}, v);
       },
       "/approx/projection holds NaN or Inf"},
      {"projection of another shape",
       [](const GoodModel& g) {
         return replace_doubles(g.path, "/approx/projection", {12, static_cast<hsize_t>(g.rank + 1)},
                                std::vector<double>(static_cast<size_t>(12 * (g.rank + 1)), 0.1));
       },
       "/approx/projection"},
      {"weights Inf",
       [inf](const GoodModel& g) {
         std::vector<double> v(static_cast<size_t>(3 * g.rank), 0.1);
         v.back() = inf;
         return replace_doubles(g.path, "/approx/weights", {3, static_cast<hsize_t>(g.rank)}, v);
       },
       "/approx/weights holds NaN or Inf"},
      {"weights for 2 classes of 3",
       [](const GoodModel& g) {
         return replace_doubles(g.path, "/approx/weights", {2, static_cast<hsize_t>(g.rank)},
                                std::vector<double>(static_cast<size_t>(2 * g.rank), 0.1));
       },
       "/approx/weights"},
      {"bias of 4 classes",
       [](const GoodModel& g) { return replace_doubles(g.path, "/approx/bias", {4}, {0, 0, 0, 0}); }, "/approx/bias"},
      {"no weights", [](const GoodModel& g) { return remove_link(g.path, "/approx/weights"); }, "/approx/weights"},
      {"a negative eigenvalue",
       [](const GoodModel& g) {
         std::vector<double> v(static_cast<size_t>(g.rank), 1.0);
         v[1] = -0.5;
         return replace_doubles(g.path, "/approx/eigenvalues", {static_cast<hsize_t>(g.rank)}, v);
       },
       "/approx/eigenvalues holds a value that is not a finite number > 0"},
      {"landmark rows out of order",
       [](const GoodModel& g) {
         return replace_dataset(g.path, "/approx/landmark_indices", {12},
                                std::vector<int64_t>{0, 1, 2, 3, 4, 5, 7, 6, 8, 9, 10, 11});
       },
       "/approx/landmark_indices is not ascending training rows"},
      {"a landmark row beyond the training rows",
       [](const GoodModel& g) {
         return replace_dataset(g.path, "/approx/landmark_indices", {12},
                                std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 90});
       },
       "/approx/landmark_indices is not ascending training rows"},
      {"gamma of /approx differs", [](const GoodModel& g) { return set_attr<double>(g.path, "/approx", "gamma", 0.123); },
       "gamma differs from the model's gamma"},
      {"gamma of /approx NaN", [nan](const GoodModel& g) { return set_attr<double>(g.path, "/approx", "gamma", nan); },
       "/approx: gamma must be a positive number"},
      {"an unknown method", [](const GoodModel& g) { return set_attr<const char*>(g.path, "/approx", "method", "rff"); },
       "unknown method 'rff'"},
      {"support vectors in a nystroem model",
       [](const GoodModel& g) { return replace_doubles(g.path, "/svm/support_vectors", {1, 4}, {1, 2, 3, 4}); },
       "a nystroem model has no /svm/support_vectors"},
      {"a linear nystroem model", [](const GoodModel& g) { return set_attr<const char*>(g.path, "/", "kernel", "linear"); },
       "a nystroem model's kernel must be rbf"},
      {"/approx in an exact model", [](const GoodModel& g) { return set_attr<const char*>(g.path, "/", "kind", "c-svc"); },
       ""},  // the exact datasets are missing first or /approx is named: either way refused
      {"an unknown kind", [](const GoodModel& g) { return set_attr<const char*>(g.path, "/", "kind", "nystrom"); },
       "unknown kind 'nystrom' (c-svc, one-class or nystroem)"},
  };
  int index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const GoodModel g = write_good_model(dir.file("case" + std::to_string(index++) + ".h5"));
    ASSERT_TRUE(c.edit(g));
    const std::string why = svm_test::model_file_refusal(g.path);
    ASSERT_NE(why, "") << "read without complaint";
    EXPECT_EQ(why.rfind(g.path + ": ", 0), 0u) << why;
    EXPECT_NE(why.find(c.says), std::string::npos) << why;
  }
}

// The models of every C of one map share its landmarks and projection (one copy for a --cv
// fold's C list), and each C's weights are its own call's.
TEST(SvmNystroem, EveryCOfOneMapSharesItsLandmarksAndProjection) {
  Problem p = make_problem(150, 5, 3, 101);
  std::vector<float> X = p.X;
  const svm::ClassifierParams params = approx_params(30);
  const svm::PreparedSet rows(X.data(), p.y.data(), p.n, p.dim, params);
  const std::vector<svm::Classifier> both = rows.fit_each_C(params, {0.5, 8.0}, cae::Device::cpu);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].file().approx.landmarks.get(), both[1].file().approx.landmarks.get());
  EXPECT_EQ(both[0].file().approx.projection.get(), both[1].file().approx.projection.get());
  EXPECT_NE(both[0].file().approx.weights, both[1].file().approx.weights);
  EXPECT_EQ(both[0].file().C, 0.5);
  EXPECT_EQ(both[1].file().C, 8.0);
  svm::ClassifierParams one = params;
  one.C = 8.0;
  EXPECT_EQ(rows.fit(one, cae::Device::cpu).file().approx.weights, both[1].file().approx.weights);
}
