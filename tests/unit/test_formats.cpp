// The open stages: plain HDF5 features, the one reader of every features format
// (ae::read_features), one-class rejection, libsvm's text formats (data, models, svm-scale's
// ranges) both ways against libsvm's own C API (Debian libsvm-dev), and the metrics against
// their definitions.
#include <gtest/gtest.h>
#include <libsvm/svm.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <random>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/error.h"
#include "common/half.h"
#include "common/hdf5_io.h"
#include "common/log.h"
#include "common/provenance.h"
#include "common/view_set.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/features_reader.h"
#include "kernels/ae/model.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/evaluate.h"
#include "kernels/svm/libsvm_format.h"
#include "kernels/svm/metrics.h"
#include "tests/support/svm_shortcuts.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;

void quiet_libsvm(const char*) {}

// Gaussian clouds, one centre per class, labels `names[class]`.
struct Cloud {
  std::vector<float> X;
  std::vector<int32_t> y;  // class indices
  int64_t n = 0;
  int dim = 0;
};
Cloud make_cloud(int n, int dim, int classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> centres(static_cast<size_t>(classes) * dim);
  for (double& c : centres) c = 1.5 * normal(rng);
  Cloud c;
  c.n = n;
  c.dim = dim;
  c.X.resize(static_cast<size_t>(n) * dim);
  for (int i = 0; i < n; ++i) {
    const int k = static_cast<int>(rng() % classes);
    c.y.push_back(k);
    for (int f = 0; f < dim; ++f)
      c.X[static_cast<size_t>(i) * dim + f] = static_cast<float>(centres[k * dim + f] + normal(rng));
  }
  return c;
}

void write_libsvm_text(const std::string& path, const Cloud& c, const std::vector<int>& label_of) {
  std::ofstream out(path);
  for (int64_t i = 0; i < c.n; ++i) {
    out << label_of[c.y[i]];
    for (int f = 0; f < c.dim; ++f) {
      const float v = c.X[i * c.dim + f];
      if (f % 3 == 1 && i % 2) continue;  // sparse: some features absent (0)
      out << ' ' << f + 1 << ':' << std::setprecision(9) << v;
    }
    out << '\n';
  }
}

std::vector<svm_node> node_row(const float* x, int dim) {
  std::vector<svm_node> row;
  for (int f = 0; f < dim; ++f)
    if (x[f] != 0) row.push_back({f + 1, x[f]});
  row.push_back({-1, 0});
  return row;
}

}  // namespace

// ---- plain HDF5 features ---------------------------------------------------------------------

TEST(FormatsPlainFeatures, Float64FeaturesAndInt64LabelsReadAsTheToolkitsTypes) {
  TempDir dir;
  const std::string path = dir.file("plain.h5");
  const Cloud c = make_cloud(37, 5, 3, 1);
  std::vector<double> X64(c.X.begin(), c.X.end());
  for (size_t i = 0; i < X64.size(); ++i) X64[i] += 1e-9 * static_cast<double>(i);  // not float32-exact
  std::vector<int64_t> labels(c.y.begin(), c.y.end());
  labels[4] = 5;  // the largest label makes six classes without class_names
  {
    cae::Hdf5Writer w(path);
    w.write("/train/features", X64.data(), {37, 5});
    w.write("/train/labels", labels);
    w.close();
  }
  ae::FeaturesReader r(path);
  EXPECT_TRUE(r.plain());
  EXPECT_EQ(r.encoder_sha256(), "");
  EXPECT_EQ(r.class_names(), (std::vector<std::string>{"0", "1", "2", "3", "4", "5"}));
  const ae::FeatureSplit s = r.read("train", -1);
  ASSERT_EQ(s.n, 37);
  ASSERT_EQ(s.dim, 5);
  for (size_t i = 0; i < X64.size(); ++i) ASSERT_EQ(s.X[i], static_cast<float>(X64[i])) << i;
  for (size_t i = 0; i < labels.size(); ++i) ASSERT_EQ(s.labels[i], labels[i]);
  EXPECT_FALSE(r.has_split("test"));
}

TEST(FormatsPlainFeatures, RefusesWhatItCannotClassify) {
  TempDir dir;
  auto expect_refused = [&](const std::string& name, std::vector<double> X, std::vector<int64_t> y,
                            const std::string& problem) {
    const std::string path = dir.file(name);
    {
      cae::Hdf5Writer w(path);
      w.write("/train/features", X.data(), {y.size(), X.size() / y.size()});
      w.write("/train/labels", y);
      w.close();
    }
    try {
      ae::FeaturesReader r(path);
      r.read("train", -1);
      ADD_FAILURE() << name << " was read";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(path, 0), 0u) << e.what();
    }
  };
  expect_refused("huge.h5", {1, 2, 3e300, 4}, {0, 1}, "row 1 feature 0 is infinite");
  expect_refused("nan.h5", {1, std::nan(""), 3, 4}, {0, 1}, "NaN");
  expect_refused("negative.h5", {1, 2, 3, 4}, {0, -1}, "negative");
  // Integer features are not a float dataset.
  const std::string ints = dir.file("ints.h5");
  {
    cae::Hdf5Writer w(ints);
    w.write("/train/features", std::vector<int32_t>{1, 2, 3, 4}.data(), {2, 2});
    w.write("/train/labels", std::vector<int64_t>{0, 1});
    w.close();
  }
  ae::FeaturesReader r(ints);
  EXPECT_THROW(r.read("train", -1), std::runtime_error);
  // Neither kind: no format attribute and no features.
  const std::string empty = dir.file("empty.h5");
  {
    cae::Hdf5Writer w(empty);
    w.write("/other", std::vector<int64_t>{1});
    w.close();
  }
  EXPECT_THROW(ae::FeaturesReader{empty}, std::runtime_error);
}

// ---- libsvm text data ------------------------------------------------------------------------

TEST(FormatsLibsvmData, SparseTextReadsDenseWithLabelsAsWritten) {
  TempDir dir;
  const Cloud c = make_cloud(50, 7, 3, 2);
  const std::vector<int> label_of = {7, -1, 3};
  const std::string path = dir.file("d.libsvm");
  write_libsvm_text(path, c, label_of);
  const cae::LibsvmData d = cae::read_libsvm_data(path);
  ASSERT_EQ(d.n, 50);
  ASSERT_EQ(d.dim, 7);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"-1", "3", "7"}));  // ascending
  for (int64_t i = 0; i < c.n; ++i) {
    EXPECT_EQ(d.class_names[d.labels[i]], std::to_string(label_of[c.y[i]]));
    for (int f = 0; f < c.dim; ++f) {
      const float want = (f % 3 == 1 && i % 2) ? 0.0f : c.X[i * c.dim + f];
      ASSERT_EQ(d.X[i * d.dim + f], want) << i << "," << f;
    }
  }
  // A model's classes keep their indices; labels it does not know come after them.
  const cae::LibsvmData m = cae::read_libsvm_data(path, {"7", "3"}, 9);
  EXPECT_EQ(m.class_names, (std::vector<std::string>{"7", "3", "-1"}));
  EXPECT_EQ(m.dim, 9);
  for (int64_t i = 0; i < c.n; ++i) EXPECT_EQ(m.class_names[m.labels[i]], std::to_string(label_of[c.y[i]]));
  for (int64_t i = 0; i < c.n; ++i) EXPECT_EQ(m.X[i * 9 + 8], 0.0f);
}

TEST(FormatsLibsvmData, MalformedLinesAreRefusedWithTheirNumber) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1 1:0.5\n2 3:1 2:4\n", "line 2: index 2 after 3"},
      {"1 1:0.5\nx 1:2\n", "line 2: label 'x' is not an integer"},
      {"1.5 1:0.5\n", "line 1: label '1.5'"},
      {"1 1:0.5 0:3\n", "line 1: '0:3' has no index"},
      {"1 1:abc\n", "line 1: '1:abc' has no number"},
      {"1 1:1e60\n", "line 1: '1:1e60' is not a finite float32"},
      {"1 1:0.5 2\n", "line 1: '2' is not index:value"},
      {"\n\n", "has no rows"},
  };
  int i = 0;
  for (const auto& [text, problem] : cases) {
    const std::string path = dir.file("bad" + std::to_string(i++));
    std::ofstream(path) << text;
    try {
      cae::read_libsvm_data(path);
      ADD_FAILURE() << text << " was read";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
    }
  }
  // A few hundred bytes whose dense matrix would take 430 GB: refused before allocating.
  const std::string wide = dir.file("wide");
  {
    std::ofstream out(wide);
    for (int r = 0; r < 100; ++r) out << (r % 2) << " 1073741823:1\n";
  }
  try {
    cae::read_libsvm_data(wide);
    ADD_FAILURE() << "a 100 x 1073741823 dense matrix was allocated";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than half of this machine's memory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(cae::is_libsvm_text(dir.file("bad0")));
  const std::string h5 = dir.file("x.h5");
  {
    cae::Hdf5Writer w(h5);
    w.write("/a", std::vector<int64_t>{1});
    w.close();
  }
  EXPECT_FALSE(cae::is_libsvm_text(h5));
}

// ---- models: the toolkit's to libsvm and back ---------------------------------------------------

// save_libsvm_model's file, read by libsvm's svm_load_model, predicts the scaled rows as the
// Classifier predicts the raw ones; the labels are the integer class names.
TEST(FormatsLibsvmModel, ExportIsReadByLibsvmAndPredictsLikeTheToolkit) {
  svm_set_print_string_function(quiet_libsvm);
  TempDir dir;
  Cloud c = make_cloud(400, 6, 4, 3);
  for (int64_t i = 0; i < c.n; ++i) c.X[i * c.dim + 2] = 1.75f;  // a constant feature: dropped by the fit
  const int64_t n_train = 300, n_test = c.n - n_train;
  std::vector<float> train(c.X.begin(), c.X.begin() + n_train * c.dim);
  svm::ClassifierParams params;
  params.C = 5;
  params.log_summary = false;
  svm::Classifier clf;
  clf.fit(train.data(), c.y.data(), n_train, c.dim, params, cae::Device::cpu);
  clf.set_class_names({"-4", "0", "9", "12"});
  ASSERT_EQ(clf.n_features_kept(), c.dim - 1);
  const std::string path = dir.file("model.libsvm");
  {
    cae::AtomicOutput out(path);
    svm::save_libsvm_model(out, clf.file());
    out.commit();
  }
  svm_model* lm = svm_load_model(path.c_str());
  ASSERT_NE(lm, nullptr);
  EXPECT_EQ(lm->l, clf.model().n_sv());
  std::vector<float> test(c.X.begin() + n_train * c.dim, c.X.end());
  std::vector<float> scaled = test;
  clf.scale(scaled.data(), n_test);
  std::vector<float> raw = test;
  const std::vector<int32_t> ours = svm_test::predict(clf, raw.data(), n_test);
  const std::vector<int> label_of = {-4, 0, 9, 12};
  int same = 0;
  for (int64_t i = 0; i < n_test; ++i) {
    const std::vector<svm_node> row = node_row(scaled.data() + i * c.dim, c.dim);
    same += static_cast<int>(svm_predict(lm, row.data())) == label_of[ours[i]];
  }
  EXPECT_GE(same, n_test - 1);
  svm_free_and_destroy_model(&lm);
}

// A model trained by libsvm itself, with probability sigmoids: imported, it gives libsvm's
// predictions and probabilities. Classes first seen in descending order (libsvm keeps that
// order, the toolkit sorts, flipping pairs) and in ascending order (nothing flips).
// libsvm's multiclass probabilities come from an iteration that stops once its residual is
// below 0.005/k, so another class order (the flipped case) ends elsewhere within that
// stopping band (measured 2e-3); in the
// same order they agree to the float32 kernel values' rounding (measured 1e-6).
TEST(FormatsLibsvmModel, ImportedLibsvmModelPredictsAsLibsvm) {
  svm_set_print_string_function(quiet_libsvm);
  TempDir dir;
  Cloud c = make_cloud(360, 5, 4, 4);
  for (int i = 0; i < 4; ++i) c.y[i] = i;  // first seen: classes 0, 1, 2, 3
  const int64_t n_train = 260, n_test = c.n - n_train;
  for (const auto& [label_of, tolerance] :
       {std::make_pair(std::vector<int>{12, 5, 0, -3}, 1e-2), std::make_pair(std::vector<int>{-3, 0, 5, 12}, 1e-5)}) {
    std::vector<std::vector<svm_node>> rows;
    std::vector<svm_node*> ptrs;
    std::vector<double> y;
    for (int64_t i = 0; i < n_train; ++i) rows.push_back(node_row(c.X.data() + i * c.dim, c.dim));
    for (int64_t i = 0; i < n_train; ++i) ptrs.push_back(rows[i].data()), y.push_back(label_of[c.y[i]]);
    svm_problem prob{static_cast<int>(n_train), y.data(), ptrs.data()};
    svm_parameter p{};
    p.svm_type = C_SVC;
    p.kernel_type = RBF;
    p.gamma = 0.3;
    p.C = 4;
    p.cache_size = 50;
    p.eps = 1e-4;
    p.shrinking = 1;
    p.probability = 1;
    svm_model* trained = svm_train(&prob, &p);
    const std::string path = dir.file("trained.model");
    ASSERT_EQ(svm_save_model(path.c_str(), trained), 0);
    svm_model* lm = svm_load_model(path.c_str());

    const svm::Classifier clf = svm::load_classifier(path);
    EXPECT_EQ(clf.model().n_sv(), lm->l);
    EXPECT_EQ(clf.file().class_names, (std::vector<std::string>{"-3", "0", "5", "12"}));
    ASSERT_TRUE(clf.has_probability());
    std::vector<float> test(c.X.begin() + n_train * c.dim, c.X.end());
    const std::vector<double> dec = clf.decision_values(test.data(), n_test);
    const std::vector<int32_t> pred = clf.vote(dec, n_test);
    const std::vector<double> prob_ours = clf.probabilities(dec, n_test);
    int same = 0;
    double worst = 0;
    std::vector<double> prob_ref(4), dec_ref(6);
    for (int64_t i = 0; i < n_test; ++i) {
      const std::vector<svm_node> row = node_row(c.X.data() + (n_train + i) * c.dim, c.dim);
      same += static_cast<int>(svm_predict_values(lm, row.data(), dec_ref.data())) ==
              std::stoi(clf.file().class_names[pred[i]]);
      svm_predict_probability(lm, row.data(), prob_ref.data());
      for (int k = 0; k < 4; ++k) {  // prob_ref in libsvm's class order (lm->label), ours ascending
        const auto& names = clf.file().class_names;
        const int ours_k =
            static_cast<int>(std::find(names.begin(), names.end(), std::to_string(lm->label[k])) - names.begin());
        worst = std::max(worst, std::fabs(prob_ref[k] - prob_ours[i * 4 + ours_k]));
      }
    }
    EXPECT_GE(same, n_test - 1);
    EXPECT_LT(worst, tolerance) << "labels first seen " << label_of[0] << "," << label_of[1];
    svm_free_and_destroy_model(&lm);
    svm_free_and_destroy_model(&trained);
  }
}

// svm-scale's map: lower + (upper − lower)(x − min)/(max − min); an unlisted or constant
// feature is 0.
TEST(FormatsLibsvmModel, RangeFileScalesAsSvmScale) {
  TempDir dir;
  const std::string path = dir.file("range");
  std::ofstream(path) << "x\n-1 1\n1 2 10\n2 -5 -1\n4 3 3\n";
  const svm::LibsvmRange r = svm::read_libsvm_range(path);
  ASSERT_EQ(r.dim, 4);
  svm::Scaler s{r.offset, r.scale};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-8, 12);
  std::vector<float> x(40);
  for (float& v : x) v = u(rng);
  std::vector<float> y = x;
  svm::apply_scaler(s, y.data(), 10, 4);
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(y[i * 4 + 0], -1 + 2 * (x[i * 4 + 0] - 2) / 8, 1e-5);
    EXPECT_NEAR(y[i * 4 + 1], -1 + 2 * (x[i * 4 + 1] + 5) / 4, 1e-5);
    EXPECT_EQ(y[i * 4 + 2], 0.0f);
    EXPECT_EQ(y[i * 4 + 3], 0.0f);
  }
  std::ofstream(dir.file("y")) << "y\n0 1\n1 2\nx\n-1 1\n1 0 1\n";
  EXPECT_THROW(svm::read_libsvm_range(dir.file("y")), std::runtime_error);
}

// ---- one reader for every features format ----------------------------------------------------

namespace {

// The same rows as an ae-features file (with mirrors and an encoder hash), a plain HDF5
// file (float64, no mirrors) and libsvm text (every feature written, so it reads back exact).
struct ThreeFormats {
  std::string ae, plain, text;
  Cloud c, flipped;
};

ThreeFormats write_three_formats(const TempDir& dir) {
  ThreeFormats t;
  t.ae = dir.file("ae.h5");
  t.plain = dir.file("plain.h5");
  t.text = dir.file("rows.libsvm");
  const ae::Architecture arch(3, 8, 8, {4, 2});  // latent [2, 2, 2]: 8 features a row
  t.c = make_cloud(40, static_cast<int>(arch.latent_dim()), 3, 11);
  t.flipped = make_cloud(40, t.c.dim, 3, 12);
  // Values a float16 file (ae-encode's default) holds exactly, so that every format gives the same rows.
  cae::round_to_half(t.c.X.data(), t.c.X.size());
  cae::round_to_half(t.flipped.X.data(), t.flipped.X.size());
  const std::vector<uint8_t> labels(t.c.y.begin(), t.c.y.end());
  const std::string previous_tool = cae::log_tool();
  cae::set_log_tool("ae-encode");  // the writer's created_by, which encoder_sha256 trusts
  {
    ae::FeaturesWriter w(t.ae, t.ae, arch);
    const cae::ViewSet image_and_mirror = cae::ViewSet::parse("flip");
    w.begin_split("train", t.c.n, image_and_mirror);
    w.write_rows("train", 0, t.c.n, t.c.X.data(), /*view=*/0);
    w.write_rows("train", 0, t.c.n, t.flipped.X.data(), /*view=*/1);  // views() order: the image, its mirror
    w.write_labels("train", labels);
    w.finish(cae::Provenance{"ae-features", 1, "{}", {{"model.h5", std::string(64, 'e')}}},
             {"cpu", 1.0, 1.0, {"ant", "bee", "cat"}});
  }
  cae::set_log_tool(previous_tool);
  {
    const std::vector<double> X64(t.c.X.begin(), t.c.X.end());
    cae::Hdf5Writer w(t.plain);
    w.write("/train/features", X64.data(), {static_cast<uint64_t>(t.c.n), static_cast<uint64_t>(t.c.dim)});
    w.write("/train/labels", std::vector<int64_t>(t.c.y.begin(), t.c.y.end()));
    w.close();
  }
  std::ofstream out(t.text);
  for (int64_t i = 0; i < t.c.n; ++i) {
    out << t.c.y[i];
    for (int f = 0; f < t.c.dim; ++f) out << ' ' << f + 1 << ':' << std::setprecision(9) << t.c.X[i * t.c.dim + f];
    out << '\n';
  }
  return t;
}

}  // namespace

TEST(FormatsFeatureReader, EveryFormatGivesTheSameRowsLabelsAndWhatItKnows) {
  TempDir dir;
  const ThreeFormats t = write_three_formats(dir);
  ae::FeatureRequest request;
  request.limit = 25;
  for (const std::string& path : {t.ae, t.plain, t.text}) {
    const ae::FeatureRows rows = ae::read_features(path, request);
    ASSERT_EQ(rows.n, 25) << path;
    EXPECT_EQ(rows.available, 40) << path;
    ASSERT_EQ(rows.split.n, 25) << path;
    ASSERT_EQ(rows.split.dim, t.c.dim) << path;
    ASSERT_EQ(rows.split.X.size(), static_cast<size_t>(25 * t.c.dim)) << path;
    EXPECT_TRUE(std::equal(rows.split.X.begin(), rows.split.X.end(), t.c.X.begin())) << path;
    EXPECT_TRUE(std::equal(rows.split.labels.begin(), rows.split.labels.end(), t.c.y.begin())) << path;
  }
  const ae::FeatureRows a = ae::read_features(t.ae, request);
  EXPECT_EQ(a.format, ae::FeaturesFormat::ae_features);
  EXPECT_EQ(a.class_names, (std::vector<std::string>{"ant", "bee", "cat"}));
  EXPECT_EQ(a.encoder_sha256, std::string(64, 'e'));
  EXPECT_EQ(a.what, "/train/features");
  const ae::FeatureRows p = ae::read_features(t.plain, request);
  EXPECT_EQ(p.format, ae::FeaturesFormat::plain);
  EXPECT_EQ(p.class_names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(p.encoder_sha256, "");
  const ae::FeatureRows l = ae::read_features(t.text, request);
  EXPECT_EQ(l.format, ae::FeaturesFormat::libsvm_text);
  EXPECT_EQ(l.class_names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(l.what, "its rows");
  // No limit (0) and a limit beyond the rows: all of them.
  for (int64_t limit : {int64_t{0}, int64_t{1000}}) {
    request.limit = limit;
    EXPECT_EQ(ae::read_features(t.plain, request).n, 40);
    EXPECT_EQ(ae::read_features(t.text, request).n, 40);
  }
}

TEST(FormatsFeatureReader, MirrorsFollowTheOriginalsAndAreRefusedWhereAFileHasNone) {
  TempDir dir;
  const ThreeFormats t = write_three_formats(dir);
  ae::FeatureRequest request;
  request.limit = 30;
  request.ask_views(cae::ViewSet::parse("flip"), "--augment");
  EXPECT_EQ(request.views_option, "--augment flip");
  const ae::FeatureRows rows = ae::read_features(t.ae, request);
  ASSERT_EQ(rows.n, 30);
  ASSERT_EQ(rows.split.n, 60);
  const size_t half = static_cast<size_t>(30 * t.c.dim);
  EXPECT_TRUE(std::equal(rows.split.X.begin(), rows.split.X.begin() + half, t.c.X.begin()));
  EXPECT_TRUE(std::equal(rows.split.X.begin() + half, rows.split.X.end(), t.flipped.X.begin()));
  for (int64_t i = 0; i < 30; ++i) {
    EXPECT_EQ(rows.split.labels[i], t.c.y[i]);
    EXPECT_EQ(rows.split.labels[i + 30], t.c.y[i]);
  }
  try {
    ae::read_features(t.plain, request);
    ADD_FAILURE() << "mirrors of a file without /train/features_flip";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), t.plain + ": /train/features_flip is missing: --augment flip needs the features "
                                               "of the mirrored images (run ae-encode --flip)");
  }
  EXPECT_THROW(ae::read_features(t.text, request), cae::UsageError);
}

TEST(FormatsFeatureReader, LibsvmTextTakesTheModelsClassesAndWidth) {
  TempDir dir;
  const ThreeFormats t = write_three_formats(dir);
  ae::FeatureRequest request;
  request.model_classes = {"2", "0"};  // a model that knows two of the classes, in its order
  request.model_dim = t.c.dim + 4;
  const ae::FeatureRows rows = ae::read_features(t.text, request);
  ASSERT_EQ(rows.split.dim, t.c.dim + 4);
  EXPECT_EQ(rows.class_names, (std::vector<std::string>{"2", "0", "1"}));
  const int32_t index_of[3] = {1, 2, 0};  // the file's label 0, 1, 2 → class index
  for (int64_t i = 0; i < t.c.n; ++i) {
    ASSERT_EQ(rows.split.labels[i], index_of[t.c.y[i]]) << i;
    for (int f = 0; f < t.c.dim + 4; ++f)
      ASSERT_EQ(rows.split.X[i * (t.c.dim + 4) + f], f < t.c.dim ? t.c.X[i * t.c.dim + f] : 0.0f) << i << " " << f;
  }
}

// ---- one-class rejection ---------------------------------------------------------------------

// reject_outside says inside exactly where libsvm's svm_predict, on the exported one-class
// model, says +1 (float32 against libsvm's double kernel values: at most a row within
// rounding of the boundary may differ); two identical views decide as one.
TEST(FormatsOneClassRejection, InsideWhereSvmPredictSaysPlusOne) {
  svm_set_print_string_function(quiet_libsvm);
  TempDir dir;
  Cloud train = make_cloud(300, 6, 1, 21);
  Cloud test = make_cloud(200, 6, 1, 21);
  for (float& x : test.X) x *= 1.6f;  // wider: some rows fall outside
  svm::ClassifierParams params;
  params.kind = svm::SvmKind::one_class;
  params.nu = 0.1;
  params.gamma = "0.1";
  params.standardize = false;
  params.log_summary = false;
  svm::Classifier one_class;
  std::vector<float> scratch = train.X;
  one_class.fit(scratch.data(), train.y.data(), train.n, train.dim, params, cae::Device::cpu);
  const std::string path = dir.file("oc.libsvm");
  {
    cae::AtomicOutput out(path);
    svm::save_libsvm_model(out, one_class.file());
    out.commit();
  }
  svm_model* lm = svm_load_model(path.c_str());
  ASSERT_NE(lm, nullptr);
  const svm::Rejection r = svm::reject_outside(one_class, "oc.h5", test.X.data(), test.n, 1, cae::Device::cpu);
  ASSERT_EQ(r.inside.size(), static_cast<size_t>(test.n));
  int same = 0, outside = 0;
  for (int64_t i = 0; i < test.n; ++i) {
    const std::vector<svm_node> row = node_row(test.X.data() + i * test.dim, test.dim);
    same += (svm_predict(lm, row.data()) > 0) == (r.inside[i] == 1);
    outside += r.inside[i] == 0;
  }
  svm_free_and_destroy_model(&lm);
  EXPECT_GE(same, test.n - 1);
  EXPECT_EQ(r.outside, outside);
  EXPECT_GT(outside, 10);
  EXPECT_LT(outside, test.n - 10);
  EXPECT_DOUBLE_EQ(r.outside_fraction(), double(outside) / double(test.n));
  // The rows are read, not scaled in place; two equal views average to the same decision.
  std::vector<float> twice = test.X;
  twice.insert(twice.end(), test.X.begin(), test.X.end());
  const svm::Rejection r2 = svm::reject_outside(one_class, "oc.h5", twice.data(), test.n, 2, cae::Device::cpu);
  EXPECT_EQ(r2.inside, r.inside);
  EXPECT_TRUE(std::equal(twice.begin(), twice.begin() + test.X.size(), test.X.begin()));
}

// More rows than one prediction block, three different views: reject_outside copies a
// block of one view at a time, and decides exactly as the views' whole-input decision
// values (one call per view) averaged by average_views.
TEST(FormatsOneClassRejection, BlocksOfViewsDecideAsWholeViews) {
  Cloud train = make_cloud(300, 6, 1, 22);
  svm::ClassifierParams params;
  params.kind = svm::SvmKind::one_class;
  params.nu = 0.1;
  params.gamma = "0.1";
  params.log_summary = false;
  svm::Classifier one_class;
  std::vector<float> scratch = train.X;
  one_class.fit(scratch.data(), train.y.data(), train.n, train.dim, params, cae::Device::cpu);
  const int64_t block = svm::decision_block_rows(one_class.model());
  const int views = 3;
  Cloud test = make_cloud(static_cast<int>(2 * block + 37) * views, 6, 1, 22);  // train's centre
  for (float& x : test.X) x *= 1.3f;  // wider: some rows fall outside
  const int64_t n = test.n / views;
  std::vector<double> dec;
  for (int v = 0; v < views; ++v) {
    std::vector<float> rows(test.X.begin() + v * n * test.dim, test.X.begin() + (v + 1) * n * test.dim);
    const std::vector<double> d = one_class.decision_values(rows.data(), n, cae::Device::cpu);
    dec.insert(dec.end(), d.begin(), d.end());
  }
  const std::vector<double> avg = svm::average_views(dec, n, 1, views);
  const std::vector<float> before = test.X;
  const svm::Rejection r = svm::reject_outside(one_class, "oc.h5", test.X.data(), n, views, cae::Device::cpu);
  ASSERT_EQ(r.inside.size(), static_cast<size_t>(n));
  int64_t outside = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(r.inside[i], avg[i] > 0 ? 1 : 0) << i;
    outside += avg[i] > 0 ? 0 : 1;
  }
  EXPECT_EQ(r.outside, outside);
  EXPECT_GT(outside, 0);
  EXPECT_LT(outside, n);
  EXPECT_EQ(test.X, before);  // read only
}

TEST(FormatsOneClassRejection, AccuracyInsideAndWhatClassifyPrints) {
  svm::Rejection r;
  r.inside = {1, 0, 1, 1, 0};
  r.outside = 2;
  svm::Evaluation e;
  e.n = 5;
  e.labels = {0, 1, 2, 1, 0};
  e.predictions = {0, 0, 1, 1, 0};
  EXPECT_DOUBLE_EQ(svm::accuracy_inside(r, e), 2.0 / 3.0);  // rows 0, 2, 3: two right
  EXPECT_EQ(svm::rejection_summary(r, e), ", 2 outside (40.00 %; accuracy inside 66.67 %)");
  r.inside = {0, 0, 0, 0, 0};
  EXPECT_TRUE(std::isnan(svm::accuracy_inside(r, e)));

  const std::vector<std::string> names = {"ant", "bee", "cat"};
  svm::RowVerdict v{"", 17, 2, {{2, 2}, {0, 1}}, 0};
  EXPECT_EQ(svm::verdict_text(v, names, false), "17: outside (cat)  (cat 2 votes, ant 1 votes)");
  EXPECT_EQ(svm::verdict_json(v, names, false),
            "{\"row\":17,\"label\":2,\"class\":\"cat\",\"scores\":[{\"class\":\"cat\",\"label\":2,\"votes\":2},"
            "{\"class\":\"ant\",\"label\":0,\"votes\":1}],\"inside\":false}");
  v = {"a.png", 0, 1, {{1, 0.625}}, -1};
  EXPECT_EQ(svm::verdict_text(v, names, true), "a.png: bee  (bee 0.625)");
  EXPECT_EQ(svm::verdict_json(v, names, true),
            "{\"file\":\"a.png\",\"label\":1,\"class\":\"bee\",\"scores\":[{\"class\":\"bee\",\"label\":1,"
            "\"probability\":0.625}]}");
}

// ---- metrics ---------------------------------------------------------------------------------

// Ten rows, classes 0..4 (class 4 in neither labels nor predictions; class 3 never
// predicted), numbers worked out by hand from sklearn's definitions.
TEST(FormatsMetrics, ClassificationReportByHand) {
  const std::vector<int32_t> y = {0, 0, 0, 1, 1, 2, 2, 2, 2, 3};
  const std::vector<int32_t> p = {0, 1, 0, 1, 2, 2, 2, 0, 2, 0};
  const svm::ClassificationReport r = svm::classification_report(svm::confusion_matrix(y.data(), p.data(), 10, 5), 5);
  EXPECT_DOUBLE_EQ(r.accuracy, 0.6);
  const double precision[] = {0.5, 0.5, 0.75, 0}, recall[] = {2.0 / 3, 0.5, 0.75, 0}, f1[] = {4.0 / 7, 0.5, 0.75, 0};
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(r.per_class[c].precision, precision[c], 1e-12) << c;
    EXPECT_NEAR(r.per_class[c].recall, recall[c], 1e-12) << c;
    EXPECT_NEAR(r.per_class[c].f1, f1[c], 1e-12) << c;
    EXPECT_TRUE(r.per_class[c].present);
  }
  EXPECT_FALSE(r.per_class[4].present);
  EXPECT_EQ(r.per_class[2].support, 4);
  EXPECT_NEAR(r.macro_precision, 1.75 / 4, 1e-12);
  EXPECT_NEAR(r.macro_f1, (4.0 / 7 + 1.25) / 4, 1e-12);
  EXPECT_NEAR(r.balanced_accuracy, (2.0 / 3 + 1.25) / 4, 1e-12);
  EXPECT_NEAR(r.weighted_f1, (3 * 4.0 / 7 + 1 + 3) / 10, 1e-12);
  const std::vector<int64_t> confusion = svm::confusion_matrix(y.data(), p.data(), 10, 5);
  EXPECT_DOUBLE_EQ(svm::score(svm::Scoring::macro_f1, confusion, 5), r.macro_f1);
  EXPECT_DOUBLE_EQ(svm::score(svm::Scoring::balanced_accuracy, confusion, 5), r.balanced_accuracy);
  EXPECT_THROW(svm::score(svm::Scoring::log_loss, confusion, 5), std::invalid_argument);
  EXPECT_EQ(svm::parse_scoring("balanced_accuracy"), svm::Scoring::balanced_accuracy);
  EXPECT_THROW(svm::parse_scoring("f2"), std::invalid_argument);
}

// Balanced accuracy leaves out a class that is only predicted (sklearn drops its NaN recall).
TEST(FormatsMetrics, BalancedAccuracyIgnoresClassesOnlyPredicted) {
  const std::vector<int32_t> y = {0, 0, 1, 1}, p = {0, 2, 1, 1};
  const svm::ClassificationReport r = svm::classification_report(svm::confusion_matrix(y.data(), p.data(), 4, 3), 3);
  EXPECT_NEAR(r.balanced_accuracy, (0.5 + 1.0) / 2, 1e-12);
  EXPECT_NEAR(r.macro_recall, (0.5 + 1.0 + 0) / 3, 1e-12);
}

// Top-k with a tie at the k-th place (broken towards the larger index) and log-loss with a
// clipped zero, by hand.
TEST(FormatsMetrics, TopKAndLogLossByHand) {
  const std::vector<double> prob = {0.5, 0.3, 0.2,   // true 1: second → top-2 hit
                                    0.2, 0.4, 0.4,   // true 1: tie with 2, which ranks first → top-1 miss, top-2 hit
                                    0.6, 0.4, 0.0};  // true 2: last
  const std::vector<int32_t> y = {1, 1, 2};
  EXPECT_DOUBLE_EQ(svm::top_k_accuracy(prob.data(), y.data(), 3, 3, 1), 0.0);
  EXPECT_DOUBLE_EQ(svm::top_k_accuracy(prob.data(), y.data(), 3, 3, 2), 2.0 / 3);
  EXPECT_DOUBLE_EQ(svm::top_k_accuracy(prob.data(), y.data(), 3, 3, 3), 1.0);
  EXPECT_NEAR(svm::log_loss(prob.data(), y.data(), 3, 3), (-std::log(0.3) - std::log(0.4) - std::log(1e-15)) / 3,
              1e-12);
}

// ranked_classes: votes without sigmoids (the first is vote()'s class), probabilities with.
TEST(FormatsRankedClasses, FirstIsTheVoteAndScoresAreVotesOrProbabilities) {
  const Cloud c = make_cloud(240, 4, 3, 9);
  std::vector<float> X = c.X;
  svm::ClassifierParams params;
  params.log_summary = false;
  svm::Classifier clf;
  clf.fit(X.data(), c.y.data(), 200, c.dim, params, cae::Device::cpu);
  std::vector<float> test(c.X.begin() + 200 * c.dim, c.X.end());
  const std::vector<double> dec = clf.decision_values(test.data(), 40);
  const std::vector<int32_t> pred = clf.vote(dec, 40);
  const auto ranked = svm::ranked_classes(clf, dec, 40);
  ASSERT_EQ(ranked.size(), 40u);
  for (int64_t r = 0; r < 40; ++r) {
    ASSERT_EQ(ranked[r].size(), 3u);
    EXPECT_EQ(ranked[r][0].label, pred[r]);
    double votes = 0;
    for (const auto& s : ranked[r]) votes += s.value;
    EXPECT_EQ(votes, 3.0);  // one vote per pair
    EXPECT_GE(ranked[r][0].value, ranked[r][1].value);
    EXPECT_GE(ranked[r][1].value, ranked[r][2].value);
  }
}
