// Probability estimates (kernels/svm/probability.h): libsvm's sigmoid_train, sigmoid_predict
// and multiclass_probability; their use through the Classifier; the model file's probA/probB;
// the cross-validated sigmoids.
//
// Reference numbers: a Python transcription of libsvm 3.24's sigmoid_train and
// multiclass_probability (the same loops, in Python floats), run once; and libsvm itself
// (svm_predict_probability through its C API) on our exported models.
#include <gtest/gtest.h>
#include <libsvm/svm.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/probability.h"
#include "tests/support/libsvm_export.h"
#include "tests/support/temp_dir.h"

namespace {

void quiet(const char*) {}

using cae_test::TempDir;

// k Gaussian clouds in `dim` dimensions, overlapping (spread), labels cycling 0..k-1.
void make_data(int n, int dim, int k, unsigned seed, double spread, std::vector<float>& X, std::vector<int32_t>& y) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> centre(static_cast<size_t>(k) * dim);
  for (double& c : centre) c = normal(rng);
  X.resize(static_cast<size_t>(n) * dim);
  y.resize(n);
  for (int i = 0; i < n; ++i) {
    y[i] = i % k;
    for (int f = 0; f < dim; ++f)
      X[static_cast<size_t>(i) * dim + f] = static_cast<float>(centre[y[i] * dim + f] + spread * normal(rng));
  }
}

svm::Classifier fit(std::vector<float> X, const std::vector<int32_t>& y, int dim) {
  svm::ClassifierParams p;
  p.C = 1;
  p.log_summary = false;
  svm::Classifier clf;
  clf.fit(X.data(), y.data(), static_cast<int64_t>(y.size()), dim, p, cae::Device::cpu);
  return clf;
}

}  // namespace

TEST(SvmProbability, SigmoidTrainMatchesLibsvmsAlgorithm) {
  struct Case {
    std::vector<double> dec, label;
    double A, B;  // from the Python transcription of libsvm's sigmoid_train
  };
  const std::vector<Case> cases{
      {{2.1, 1.4, 0.3, -0.2, 0.9, 1.7, -0.5, -1.1, -2.3, 0.4, -0.8, -1.6},
       {1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1},
       -1.212591691503535,
       0.03897305804650629},
      // Separable: without the smoothed targets A would run off to -infinity.
      {{3, 2.5, 2, 1.5, -1, -2, -3}, {1, 1, 1, 1, -1, -1, -1}, -0.6626580332966376, -0.021416856586617673},
      // Uninformative decision values and unequal priors: B carries the prior.
      {{0.5, -0.5, 0.5, -0.5, 0.2}, {1, 1, -1, -1, 1}, -0.17486550563052616, -0.31627420552595786},
  };
  for (const Case& c : cases) {
    double A = 0, B = 0;
    svm::sigmoid_train(static_cast<int64_t>(c.dec.size()), c.dec.data(), c.label.data(), A, B);
    EXPECT_NEAR(A, c.A, 1e-12);
    EXPECT_NEAR(B, c.B, 1e-12);
  }
  // sigmoid_predict: 1 / (1 + exp(A f + B)) on both branches, and no overflow far out.
  EXPECT_DOUBLE_EQ(svm::sigmoid_predict(0.7, -1.3, 0.2), 1 / (1 + std::exp(-1.3 * 0.7 + 0.2)));
  EXPECT_DOUBLE_EQ(svm::sigmoid_predict(-0.7, -1.3, 0.2), 1 / (1 + std::exp(1.3 * 0.7 + 0.2)));
  EXPECT_EQ(svm::sigmoid_predict(1e6, 1, 0), 0.0);
  EXPECT_EQ(svm::sigmoid_predict(-1e6, 1, 0), 1.0);
}

TEST(SvmProbability, CouplingMatchesLibsvmsAlgorithmAndSumsToOne) {
  // r[i][j] = P(i | i or j); the Python transcription's answer.
  const std::vector<double> r{0, 0.7, 0.2, 0.55, 0.3, 0, 0.9, 0.35, 0.8, 0.1, 0, 0.6, 0.45, 0.65, 0.4, 0};
  std::vector<double> p(4);
  svm::multiclass_probability(4, r.data(), p.data());
  const std::vector<double> want{0.25116168022130975, 0.23430858965927573, 0.20789336458264213, 0.3066363655367724};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(p[i], want[i], 1e-12);
  // Random consistent pairwise probabilities, 3 to 12 classes: rows sum to 1, all in (0, 1),
  // and a class that wins every pair is the most probable.
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0.02, 0.98);
  for (int k = 3; k <= 12; ++k) {
    std::vector<double> rr(static_cast<size_t>(k) * k, 0.0);
    for (int i = 0; i < k; ++i)
      for (int j = i + 1; j < k; ++j) {
        rr[i * k + j] = u(rng);
        rr[j * k + i] = 1 - rr[i * k + j];
      }
    for (int j = 1; j < k; ++j) {  // class 0 beats everyone
      rr[j] = 0.9;
      rr[j * k] = 0.1;
    }
    std::vector<double> pk(k);
    svm::multiclass_probability(k, rr.data(), pk.data());
    EXPECT_NEAR(std::accumulate(pk.begin(), pk.end(), 0.0), 1.0, 1e-12) << k;
    for (double v : pk) EXPECT_TRUE(v > 0 && v < 1) << k;
    EXPECT_EQ(std::max_element(pk.begin(), pk.end()) - pk.begin(), 0) << k;
  }
}

// Our probabilities from libsvm's own decision values equal libsvm's svm_predict_probability
// on our exported model (same sigmoids, clipping and coupling), for 2 and 4 classes.
TEST(SvmProbability, ProbabilitiesEqualLibsvmsOnTheExportedModel) {
  svm_set_print_string_function(quiet);
  for (int k : {2, 4}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const int dim = 5, n = 200;
    std::vector<float> X;
    std::vector<int32_t> y;
    make_data(n, dim, k, 40 + k, 1.0, X, y);
    svm::Classifier clf = fit(X, y, dim);
    const int pairs = k * (k - 1) / 2;
    std::vector<double> A(pairs), B(pairs);
    for (int q = 0; q < pairs; ++q) {
      A[q] = -1.0 - 0.3 * q;
      B[q] = 0.1 * (q % 3) - 0.1;
    }
    clf.set_probability(A, B, 5, 1);
    ASSERT_TRUE(clf.has_probability());
    TempDir tmp;
    const std::string txt = tmp.path + "/model.txt";
    {
      cae::AtomicOutput out(txt);
      svm::write_libsvm_model(out, clf.file());
      out.commit();
    }
    svm_model* m = svm_load_model(txt.c_str());
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(svm_check_probability_model(m), 1);
    // Query rows already in the model's scaled space (the export's input).
    std::mt19937 rng(9);
    std::normal_distribution<double> normal(0.0, 1.5);
    const int nq = 50;
    std::vector<double> dec(static_cast<size_t>(nq) * pairs), want(static_cast<size_t>(nq) * k);
    std::vector<svm_node> x(dim + 1);
    for (int r = 0; r < nq; ++r) {
      for (int f = 0; f < dim; ++f) x[f] = {f + 1, normal(rng)};
      x[dim] = {-1, 0};
      svm_predict_values(m, x.data(), dec.data() + r * pairs);
      svm_predict_probability(m, x.data(), want.data() + r * k);
    }
    const std::vector<double> got = clf.probabilities(dec, nq);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    for (int r = 0; r < nq; ++r) EXPECT_NEAR(std::accumulate(&got[r * k], &got[r * k] + k, 0.0), 1.0, 1e-12);
    svm_free_and_destroy_model(&m);
  }
}

// The sigmoids come from cross-validated decision values: redo the folds by hand.
TEST(SvmProbability, SigmoidsAreFittedOnHeldOutDecisionValues) {
  const int dim = 4, n = 150, k = 3, folds = 5;
  std::vector<float> X;
  std::vector<int32_t> y;
  make_data(n, dim, k, 17, 1.2, X, y);
  svm::ClassifierParams p;
  p.log_summary = false;
  const std::vector<float> X0 = X;
  int calls = 0;
  const svm::Sigmoids s = svm::fit_sigmoids(X.data(), y.data(), n, dim, p, folds, 7, cae::Device::cpu, 1,
                                            [&](int done, int total) {
                                              EXPECT_EQ(done, ++calls);
                                              EXPECT_EQ(total, folds);
                                            });
  EXPECT_EQ(X, X0);  // read only
  EXPECT_EQ(calls, folds);
  ASSERT_EQ(s.A.size(), 3u);
  const std::vector<int> fold = svm::stratified_folds(y.data(), n, folds, 7);
  std::vector<double> cv(static_cast<size_t>(n) * 3);
  for (int f = 0; f < folds; ++f) {
    std::vector<float> tr, te;
    std::vector<int32_t> ytr;
    std::vector<int> held;
    for (int r = 0; r < n; ++r) {
      auto& dst = fold[r] == f ? te : tr;
      dst.insert(dst.end(), X0.begin() + r * dim, X0.begin() + (r + 1) * dim);
      if (fold[r] == f) held.push_back(r);
      else ytr.push_back(y[r]);
    }
    svm::Classifier clf;
    clf.fit(tr.data(), ytr.data(), static_cast<int64_t>(ytr.size()), dim, p, cae::Device::cpu);
    const std::vector<double> d = clf.decision_values(te.data(), static_cast<int64_t>(held.size()));
    for (size_t i = 0; i < held.size(); ++i) std::copy_n(&d[i * 3], 3, &cv[held[i] * 3]);
  }
  for (int a = 0, q = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++q) {
      std::vector<double> dec, lab;
      for (int c : {a, b})
        for (int r = 0; r < n; ++r)
          if (y[r] == c) {
            dec.push_back(cv[r * 3 + q]);
            lab.push_back(c == a ? 1 : -1);
          }
      double A = 0, B = 0;
      svm::sigmoid_train(static_cast<int64_t>(dec.size()), dec.data(), lab.data(), A, B);
      EXPECT_EQ(s.A[q], A);
      EXPECT_EQ(s.B[q], B);
      EXPECT_LT(A, 0);  // a larger decision value means the first class more likely
    }
  // Probabilities of the final model agree with its votes on most rows of these overlapping clouds.
  svm::Classifier clf = fit(X0, y, dim);
  clf.set_probability(s.A, s.B, s.folds, s.seed);
  std::vector<float> Xq = X0;
  const std::vector<double> dec = clf.decision_values(Xq.data(), n);
  const std::vector<int32_t> vote = clf.vote(dec, n);
  const std::vector<double> prob = clf.probabilities(dec, n);
  int agree = 0;
  for (int r = 0; r < n; ++r) agree += std::max_element(&prob[r * k], &prob[r * k] + k) - &prob[r * k] == vote[r];
  EXPECT_GE(agree, n * 9 / 10);

  // A class with a single image cannot be in every fold's training part.
  std::vector<int32_t> y1 = y;
  for (int r = 0; r < n; ++r)
    if (y1[r] == 2) y1[r] = 1;
  y1[5] = 2;
  p.data_name = "feats.h5";
  try {
    svm::fit_sigmoids(X0.data(), y1.data(), n, dim, p, folds, 7, cae::Device::cpu);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("feats.h5: class 2 has 1 training image; --probability needs at least 2"),
              std::string::npos)
        << e.what();
  }
}

// fit_sigmoids_each_C over rows picked by number from a larger matrix (cross_validate's
// outer fold, originals then mirrors) equals fit_sigmoids on those rows gathered, C by C.
TEST(SvmProbability, SigmoidsOfPickedRowsEqualFitSigmoidsOnTheGatheredRows) {
  const int dim = 5, images = 160, k = 3, folds = 5;
  std::vector<float> X;
  std::vector<int32_t> y;
  make_data(2 * images, dim, k, 23, 1.3, X, y);
  for (int i = 0; i < images; ++i) y[images + i] = y[i];  // row images + i: a "mirror" of image i
  const std::vector<float> X0 = X;
  std::vector<int64_t> picked;
  for (int view = 0; view < 2; ++view)
    for (int i = 0; i < images; ++i)
      if (i % 4 != 2) picked.push_back(i + view * images);
  const int64_t n = static_cast<int64_t>(picked.size());
  std::vector<float> gathered;
  std::vector<int32_t> y_picked;
  for (int64_t r : picked) {
    gathered.insert(gathered.end(), X.begin() + r * dim, X.begin() + (r + 1) * dim);
    y_picked.push_back(y[r]);
  }
  svm::ClassifierParams p;
  p.log_summary = false;
  p.gamma = "2x";
  const std::vector<double> Cs{0.2, 3};
  const std::vector<svm::Sigmoids> each =
      svm::fit_sigmoids_each_C(X.data(), picked.data(), y_picked.data(), n, dim, p, Cs, folds, 31, cae::Device::cpu, 2);
  EXPECT_EQ(X, X0);  // read only
  ASSERT_EQ(each.size(), Cs.size());
  for (size_t c = 0; c < Cs.size(); ++c) {
    p.C = Cs[c];
    const svm::Sigmoids one = svm::fit_sigmoids(gathered.data(), y_picked.data(), n, dim, p, folds, 31,
                                                cae::Device::cpu, 2);
    ASSERT_EQ(one.A.size(), 3u);
    EXPECT_EQ(each[c].A, one.A);  // exact
    EXPECT_EQ(each[c].B, one.B);
    EXPECT_EQ(each[c].folds, folds);
    EXPECT_EQ(each[c].seed, 31u);
    for (double A : one.A) EXPECT_LT(A, 0);  // fitted, not the starting point A = 0
  }
  EXPECT_NE(each[0].A, each[1].A);  // C matters: the comparison is not between two defaults
}

TEST(SvmProbability, ModelFileRoundTripAndRefusals) {
  const int dim = 3;
  std::vector<float> X;
  std::vector<int32_t> y;
  make_data(90, dim, 3, 5, 0.8, X, y);
  svm::Classifier clf = fit(X, y, dim);
  clf.set_class_names({"a", "b", "c"});
  EXPECT_FALSE(clf.has_probability());
  EXPECT_THROW(clf.probabilities(std::vector<double>(3), 1), std::logic_error);
  EXPECT_THROW(clf.set_probability({1, 2}, {1, 2, 3}, 5, 1), std::invalid_argument);
  clf.set_probability({-1.5, -2.25, -0.75}, {0.125, -0.5, 0.0625}, 5, 11);
  TempDir tmp;
  auto save = [&](const svm::Classifier& c, const std::string& name) {
    const std::string path = tmp.path + "/" + name;
    cae::Hdf5Writer w(path);
    w.set_attr("/", "format", "svm-model");
    w.set_attr("/", "format_version", int64_t{1});
    c.save(w);
    w.close();
    return path;
  };
  const std::string good = save(clf, "good.h5");
  const svm::Classifier back = svm::Classifier::load(good);
  EXPECT_TRUE(back.has_probability());
  EXPECT_EQ(back.file().prob_A, clf.file().prob_A);
  EXPECT_EQ(back.file().prob_B, clf.file().prob_B);
  EXPECT_EQ(back.file().probability_folds, 5);
  EXPECT_EQ(back.file().probability_seed, 11u);
  // A model without probabilities has no probA/probB and reads back without.
  svm::Classifier plain = fit(X, y, dim);
  plain.set_class_names({"a", "b", "c"});
  EXPECT_FALSE(svm::Classifier::load(save(plain, "plain.h5")).has_probability());

  // Damaged files: NaN, wrong length, one of the two missing.
  auto damaged = [&](const std::string& name, const std::vector<double>& A, const std::vector<double>& B, bool drop_B) {
    svm::ModelFile f = clf.file();
    f.prob_A = {};
    f.prob_B = {};
    const std::string path = tmp.path + "/" + name;
    cae::Hdf5Writer w(path);
    w.set_attr("/", "format", "svm-model");
    w.set_attr("/", "format_version", int64_t{1});
    svm::write_model_file(w, f);
    w.write("/svm/probA", A);
    if (!drop_B) w.write("/svm/probB", B);
    w.close();
    return path;
  };
  auto error_of = [](const std::string& path) -> std::string {
    try {
      svm::Classifier::load(path);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(no error)";
  };
  const double nan = std::nan("");
  EXPECT_NE(error_of(damaged("nan.h5", {-1, nan, -1}, {0, 0, 0}, false)).find("nan.h5: /svm/probA holds NaN or Inf"),
            std::string::npos);
  EXPECT_NE(error_of(damaged("inf.h5", {-1, -1, -1}, {0, INFINITY, 0}, false)).find("/svm/probB holds NaN or Inf"),
            std::string::npos);
  EXPECT_NE(error_of(damaged("short.h5", {-1, -1}, {0, 0}, false)).find("/svm/probA has shape [2], expected [3]"),
            std::string::npos)
      << error_of(damaged("short.h5", {-1, -1}, {0, 0}, false));
  EXPECT_NE(error_of(damaged("half.h5", {-1, -1, -1}, {}, true)).find("/svm/probB"), std::string::npos);
}
