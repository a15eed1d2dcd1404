#include "kernels/svm/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "common/class_names.h"
#include "common/error.h"
#include "common/log.h"
#include "common/memory_limit.h"
#include "common/view_set.h"

namespace svm {

using cae::fail_file;

namespace {

void write_model_selection(cae::Hdf5Writer& w, const ModelSelection& s) {
  const uint64_t nc = s.C.size(), ng = s.gamma.size(), k = static_cast<uint64_t>(s.folds);
  w.write("/model_selection/C", s.C);
  w.write("/model_selection/gamma_resolved", s.gamma_resolved.data(), {ng, k});
  w.write("/model_selection/cv_accuracy", s.cv_accuracy.data(), {nc, ng});
  w.write("/model_selection/fold_accuracy", s.fold_accuracy.data(), {nc, ng, k});
  w.write("/model_selection/cv_score", s.cv_score.data(), {nc, ng});
  w.write("/model_selection/fold_score", s.fold_score.data(), {nc, ng, k});
  if (!s.image_fold.empty()) w.write("/model_selection/image_fold", s.image_fold);
  w.set_attr("/model_selection", "scoring", scoring_name(s.scoring));
  // The specs are strings; the HDF5 layer writes strings as attributes, so they sit on the group.
  w.set_attr("/model_selection", "gamma", s.gamma);
  w.set_attr("/model_selection", "seconds", s.seconds);
  w.set_attr("/", "cv_folds", static_cast<int64_t>(s.folds));
  w.set_attr("/", "cv_seed", static_cast<int64_t>(s.seed));
  w.set_attr("/", "cv_accuracy", s.best_accuracy());
  w.set_attr("/", "cv_scoring", scoring_name(s.scoring));
  w.set_attr("/", "cv_score", s.best_score());
  w.set_attr("/", "best_C", s.C[s.best_C]);
  w.set_attr("/", "best_gamma", s.gamma[s.best_gamma]);
}

ModelSelection read_model_selection(const cae::Hdf5Reader& h5, const std::string& path, int64_t images) {
  ModelSelection s;
  const int64_t folds = h5.attr_int("/", "cv_folds");
  if (folds < 2 || folds > (int64_t{1} << 30)) fail_file(path, "cv_folds must be an integer from 2 to 2^30");
  s.folds = static_cast<int>(folds);
  s.seed = static_cast<uint64_t>(h5.attr_int("/", "cv_seed"));
  s.C = h5.read<double>("/model_selection/C", {0});
  s.gamma = h5.attr_strings("/model_selection", "gamma");
  const uint64_t nc = s.C.size(), ng = s.gamma.size(), k = s.folds;
  if (nc == 0 || ng == 0) fail_file(path, "/model_selection holds no C or no gamma");
  s.gamma_resolved = h5.read<double>("/model_selection/gamma_resolved", {ng, k});
  s.cv_accuracy = h5.read<double>("/model_selection/cv_accuracy", {nc, ng});
  s.fold_accuracy = h5.read<double>("/model_selection/fold_accuracy", {nc, ng, k});
  s.seconds = h5.has_attr("/model_selection", "seconds") ? h5.attr_double("/model_selection", "seconds") : 0.0;
  // Files written before --cv-scoring existed chose by the pooled accuracy.
  if (h5.has_attr("/model_selection", "scoring")) {
    const std::string scoring = h5.attr_string("/model_selection", "scoring");
    try {
      s.scoring = parse_scoring(scoring);
    } catch (const std::invalid_argument& e) {
      fail_file(path, std::string("/model_selection: ") + e.what());
    }
    s.cv_score = h5.read<double>("/model_selection/cv_score", {nc, ng});
    s.fold_score = h5.read<double>("/model_selection/fold_score", {nc, ng, k});
  } else {
    s.cv_score = s.cv_accuracy;
    s.fold_score = s.fold_accuracy;
  }
  for (const auto* v : {&s.cv_accuracy, &s.fold_accuracy})
    for (double a : *v)
      if (!(a >= 0 && a <= 1)) fail_file(path, "/model_selection holds an accuracy outside [0, 1]");
  // log_loss's scores are negated log-losses, the others' fractions.
  const double lowest = s.scoring == Scoring::log_loss ? -kMaxLogLoss : 0.0;
  const double highest = s.scoring == Scoring::log_loss ? 0.0 : 1.0;
  for (const auto* v : {&s.cv_score, &s.fold_score})
    for (double a : *v)
      if (!(a >= lowest && a <= highest))
        fail_file(path, cae::strprintf("/model_selection holds a %s score outside [%g, %g]", scoring_name(s.scoring),
                                       lowest, highest));
  if (h5.has("/model_selection/image_fold")) {
    s.image_fold = h5.read<int32_t>("/model_selection/image_fold", {static_cast<uint64_t>(images)});
    for (int32_t f : s.image_fold)
      if (f < 0 || f >= s.folds) fail_file(path, "/model_selection/image_fold holds a fold outside 0..cv_folds-1");
  }
  const double best_C = h5.attr_double("/", "best_C");
  const std::string best_gamma = h5.attr_string("/", "best_gamma");
  const auto c = std::find(s.C.begin(), s.C.end(), best_C);
  const auto g = std::find(s.gamma.begin(), s.gamma.end(), best_gamma);
  if (c == s.C.end() || g == s.gamma.end())
    fail_file(path, "best_C / best_gamma are not in /model_selection's lists");
  s.best_C = static_cast<int>(c - s.C.begin());
  s.best_gamma = static_cast<int>(g - s.gamma.begin());
  return s;
}

// Rows [rows, cols] of floats as float32, or as float16 where the training features were
// float16 (`halves`): exact, since the Classifier rounded them to float16 values
// (Classifier::keep_float16) before anything predicted with them. A slice at a time, so no
// second copy of them is made.
void write_float_rows(cae::Hdf5Writer& w, const std::string& name, const float* data, uint64_t rows, uint64_t cols,
                      bool halves) {
  if (!halves) {
    w.write(name, data, {rows, cols});
    return;
  }
  w.create<cae::Half>(name, {rows, cols});
  const uint64_t slice = std::max<uint64_t>(1, (uint64_t{16} << 20) / std::max<uint64_t>(cols, 1));
  cae::LargeVector<cae::Half> buf(static_cast<size_t>(std::min(rows, slice) * cols));
  for (uint64_t r = 0; r < rows; r += slice) {
    const uint64_t n = std::min(slice, rows - r);
    const size_t count = static_cast<size_t>(n * cols);
    if (cae::floats_to_halves(data + r * cols, buf.data(), count) != count)
      throw std::logic_error("write_model_file: " + name + " holds a value beyond float16's range");
    w.write_rows(name, r, n, buf.data());
  }
}

void write_approx(cae::Hdf5Writer& w, const ModelFile& f) {
  const NystroemModel& a = f.approx;
  const uint64_t M = static_cast<uint64_t>(a.M), r = static_cast<uint64_t>(a.rank);
  const uint64_t k = static_cast<uint64_t>(a.classes());
  if (!a.landmarks || !a.projection || a.landmarks->size() != M * static_cast<uint64_t>(a.dim) ||
      a.projection->size() != M * r ||
      a.weights.size() != k * r || a.eigenvalues.size() != r || a.landmark_indices.size() != M ||
      k != f.model.classes.size())
    throw std::logic_error("write_model_file: inconsistent Nyström model");
  write_float_rows(w, "/approx/landmarks", a.landmarks->data(), M, static_cast<uint64_t>(a.dim),
                   f.features_dtype == "float16");
  w.write("/approx/landmark_indices", a.landmark_indices);
  w.write("/approx/eigenvalues", a.eigenvalues);
  w.write("/approx/projection", a.projection->data(), {M, r});
  w.write("/approx/weights", a.weights.data(), {k, r});
  w.write("/approx/bias", a.bias);
  w.set_attr("/approx", "method", "nystroem");
  w.set_attr("/approx", "M", a.M);
  w.set_attr("/approx", "rank", static_cast<int64_t>(a.rank));
  w.set_attr("/approx", "seed", static_cast<int64_t>(a.seed));
  w.set_attr("/approx", "gamma", a.gamma);
  w.set_attr("/approx", "eigenvalue_floor", kEigenvalueFloor);
}

// /approx of a nystroem model, every shape and number checked against the rest of the file
// (kept features `dim`, k classes, n_train) before anything sized from it is allocated.
NystroemModel read_approx(const cae::Hdf5Reader& h5, const std::string& path, int dim, uint64_t k, int64_t n_train,
                          double gamma, std::string& features_dtype) {
  NystroemModel a;
  if (!h5.has("/approx")) fail_file(path, "a nystroem model has no /approx group");
  const std::string method = h5.attr_string("/approx", "method");
  if (method != "nystroem") fail_file(path, "/approx: unknown method '" + method + "' (nystroem)");
  a.M = h5.attr_int("/approx", "M");
  if (a.M < 1 || a.M > kMaxLandmarks)
    fail_file(path, "/approx: M " + std::to_string(a.M) + " is not a landmark count from 1 to " +
                        std::to_string(kMaxLandmarks));
  if (a.M > n_train)
    fail_file(path, "/approx: M " + std::to_string(a.M) + " landmarks of " + std::to_string(n_train) +
                        " training rows");
  const int64_t rank = h5.attr_int("/approx", "rank");
  if (rank < 1 || rank > a.M) fail_file(path, "/approx: rank " + std::to_string(rank) + " is not in [1, M]");
  a.rank = static_cast<int>(rank);
  const int64_t seed = h5.attr_int("/approx", "seed");
  if (seed < 0) fail_file(path, "/approx: seed must be >= 0");
  a.seed = static_cast<uint64_t>(seed);
  a.gamma = h5.attr_double("/approx", "gamma");
  if (!(a.gamma > 0) || !std::isfinite(a.gamma)) fail_file(path, "/approx: gamma must be a positive number");
  if (a.gamma != gamma) fail_file(path, "/approx: gamma differs from the model's gamma");
  a.dim = dim;
  const uint64_t M = static_cast<uint64_t>(a.M), r = static_cast<uint64_t>(a.rank);
  const cae::Shape shape = h5.require("/approx/landmarks", {M, static_cast<uint64_t>(dim)});
  cae::require_memory(path, "/approx/landmarks (" + std::to_string(shape[0]) + " rows of " +
                                std::to_string(shape[1]) + " features as float32)",
                      cae::saturating_product(cae::saturating_product(shape[0], shape[1]), sizeof(float)));
  cae::require_memory(path, "/approx/projection (" + std::to_string(M) + " x " + std::to_string(r) + " float64)",
                      cae::saturating_product(cae::saturating_product(M, r), sizeof(double)));
  auto landmarks = std::make_shared<cae::LargeVector<float>>(static_cast<size_t>(shape[0] * shape[1]));
  features_dtype = h5.holds_float16("/approx/landmarks") ? "float16" : "float32";
  if (features_dtype == "float32") h5.read_rows<float>("/approx/landmarks", 0, M, landmarks->data());
  else h5.read_floats("/approx/landmarks", 0, M, landmarks->data());
  a.landmarks = landmarks;
  a.landmark_indices = h5.read<int64_t>("/approx/landmark_indices", {M});
  a.eigenvalues = h5.read<double>("/approx/eigenvalues", {r});
  auto projection = std::make_shared<std::vector<double>>(h5.read<double>("/approx/projection", {M, r}));
  a.projection = projection;
  a.weights = h5.read<double>("/approx/weights", {k, r});
  a.bias = h5.read<double>("/approx/bias", {k});
  for (float v : *landmarks)
    if (!std::isfinite(v)) fail_file(path, "/approx/landmarks holds NaN or Inf");
  for (size_t i = 0; i < a.landmark_indices.size(); ++i) {
    const int64_t row = a.landmark_indices[i];
    if (row < 0 || row >= n_train || (i > 0 && row <= a.landmark_indices[i - 1]))
      fail_file(path, "/approx/landmark_indices is not ascending training rows in [0, n_train)");
  }
  for (double e : a.eigenvalues)
    if (!(e > 0) || !std::isfinite(e)) fail_file(path, "/approx/eigenvalues holds a value that is not a finite number > 0");
  auto require_finite = [&](const char* name, const std::vector<double>& values) {
    for (double v : values)
      if (!std::isfinite(v)) fail_file(path, std::string(name) + " holds NaN or Inf");
  };
  require_finite("/approx/projection", *projection);
  require_finite("/approx/weights", a.weights);
  require_finite("/approx/bias", a.bias);
  return a;
}

}  // namespace

const char* classifier_kind_name(const ModelFile& f) {
  return f.is_approx() ? "nystroem" : kind_name(f.model.kind);
}

void write_model_file(cae::Hdf5Writer& w, const ModelFile& f) {
  const Model& m = f.model;
  const uint64_t D = f.feature_mask.size(), n_sv = static_cast<uint64_t>(m.n_sv()), k = m.classes.size();
  w.write("/scaler/mean", f.scaler.mean);
  w.write("/scaler/scale", f.scaler.scale);
  w.write("/svm/feature_mask", f.feature_mask);
  w.write("/svm/dropped_values", f.dropped_values);
  if (f.is_approx()) {
    write_approx(w, f);
  } else {
    write_float_rows(w, "/svm/support_vectors", m.support_vectors.data(), n_sv, static_cast<uint64_t>(m.dim),
                     f.features_dtype == "float16");
    const uint64_t coef_rows = m.kind == SvmKind::one_class ? 1 : k - 1;
    w.write("/svm/dual_coef", m.dual_coef.data(), {coef_rows, n_sv});
    w.write("/svm/rho", m.rho);
    w.write("/svm/n_support", m.n_support);
    w.write("/svm/support_indices", m.support_indices);
  }
  w.write("/svm/classes", m.classes);
  w.set_attr("/", "kind", classifier_kind_name(f));
  w.set_attr("/", "kernel", kernel_name(m.kernel));
  if (m.kind == SvmKind::one_class) w.set_attr("/", "nu", f.nu);
  w.set_attr("/", "C", f.C);
  w.set_attr("/", "gamma", m.gamma);
  w.set_attr("/", "gamma_spec", f.gamma_spec);
  w.set_attr("/", "tol", f.tol);
  w.set_attr("/", "n_train", f.n_train);
  w.set_attr("/", "n_features", static_cast<int64_t>(D));
  w.set_attr("/", "n_features_kept", static_cast<int64_t>(m.dim));
  w.set_attr("/", "fit_seconds", f.fit_seconds);
  w.set_attr("/", "device", f.device);
  // HDF5 has no empty string list (a one-class model fitted on unlabelled rows has no names).
  if (!f.class_names.empty()) w.set_attr("/", "class_names", f.class_names);
  w.set_attr("/", "augment", f.augment);
  if (!f.encoder_sha256.empty()) w.set_attr("/", "encoder_sha256", f.encoder_sha256);
  if (f.has_probability()) {
    w.write("/svm/probA", f.prob_A);
    w.write("/svm/probB", f.prob_B);
    w.set_attr("/", "probability_folds", static_cast<int64_t>(f.probability_folds));
    w.set_attr("/", "probability_seed", static_cast<int64_t>(f.probability_seed));
  }
  if (!f.class_weight.empty()) {
    std::vector<double> weights;
    for (int32_t label : m.classes) weights.push_back(class_weight(f.class_weight, label));
    w.write("/svm/class_weight", weights);
    w.set_attr("/", "class_weight", f.class_weight_spec);
  }
  if (!f.selection.empty()) write_model_selection(w, f.selection);
}

ModelFile read_model_file(const std::string& path) {
  cae::Hdf5Reader h5(path);
  h5.require_format("svm-model", "svm-fit");
  ModelFile f;
  Model& m = f.model;
  const std::string kernel = h5.attr_string("/", "kernel");
  if (kernel == "rbf") m.kernel = KernelType::rbf;
  else if (kernel == "linear") m.kernel = KernelType::linear;
  else fail_file(path, "unknown kernel '" + kernel + "'");
  // Files written before one-class models existed have no kind: they are classifiers.
  bool approx = false;
  if (h5.has_attr("/", "kind")) {
    const std::string kind = h5.attr_string("/", "kind");
    if (kind == kind_name(SvmKind::c_svc)) m.kind = SvmKind::c_svc;
    else if (kind == kind_name(SvmKind::one_class)) m.kind = SvmKind::one_class;
    else if (kind == "nystroem") approx = true;  // a one-vs-one classifier: m.kind stays c-svc
    else fail_file(path, "unknown kind '" + kind + "' (c-svc, one-class or nystroem)");
  }
  if (approx && m.kernel != KernelType::rbf) fail_file(path, "a nystroem model's kernel must be rbf");
  const bool one_class = m.kind == SvmKind::one_class;
  m.gamma = h5.attr_double("/", "gamma");
  if (m.kernel == KernelType::rbf && !(m.gamma > 0 && std::isfinite(m.gamma)))
    fail_file(path, "gamma must be a positive number");

  f.scaler.mean = h5.read<double>("/scaler/mean", {0});
  const uint64_t D = f.scaler.mean.size();
  if (D == 0) fail_file(path, "/scaler/mean is empty");
  f.scaler.scale = h5.read<double>("/scaler/scale", {D});
  f.feature_mask = h5.read<uint8_t>("/svm/feature_mask", {D});
  uint64_t kept = 0;
  for (uint8_t v : f.feature_mask) {
    if (v > 1) fail_file(path, "/svm/feature_mask holds values other than 0 and 1");
    kept += v;
  }
  if (kept == 0) fail_file(path, "/svm/feature_mask keeps no feature");
  f.dropped_values = h5.read<float>("/svm/dropped_values", {D - kept});
  m.dim = static_cast<int>(kept);
  m.classes = h5.read<int32_t>("/svm/classes", {0});
  const uint64_t k = m.classes.size();
  if (one_class && k != 0) fail_file(path, "a one-class model has no classes, but /svm/classes is not empty");
  if (!one_class && k < 2) fail_file(path, "/svm/classes holds fewer than two classes");
  for (size_t c = 1; c < k; ++c)
    if (m.classes[c] <= m.classes[c - 1]) fail_file(path, "/svm/classes is not strictly ascending");
  if (approx) {
    // Nothing of the exact model's: a file holding both would be read as one of them silently.
    for (const char* name : {"/svm/support_vectors", "/svm/dual_coef", "/svm/rho", "/svm/n_support",
                             "/svm/support_indices"})
      if (h5.has(name)) fail_file(path, std::string("a nystroem model has no ") + name);
    const int64_t n_train = h5.attr_int("/", "n_train");
    f.approx = read_approx(h5, path, m.dim, k, n_train, m.gamma, f.features_dtype);
  } else {
    if (h5.has("/approx")) fail_file(path, "/approx belongs to a nystroem model, but kind is " + std::string(kind_name(m.kind)));
    m.n_support = h5.read<int32_t>("/svm/n_support", {one_class ? 1 : k});
    int64_t n_sv = 0;
    for (int32_t c : m.n_support) {
      if (c < 0) fail_file(path, "/svm/n_support holds a negative count");
      n_sv += c;
    }
    // Up to gigabytes: read straight into an uninitialised buffer (common/large_buffer.h).
    const cae::Shape sv_shape = h5.require("/svm/support_vectors", {static_cast<uint64_t>(n_sv), kept});
    // Deflated chunks of a few MB can declare gigabytes of support vectors: refused by their size.
    cae::require_memory(path, "/svm/support_vectors (" + std::to_string(sv_shape[0]) + " rows of " +
                                  std::to_string(sv_shape[1]) + " features as float32)",
                        cae::saturating_product(cae::saturating_product(sv_shape[0], sv_shape[1]), sizeof(float)));
    m.support_vectors.resize(static_cast<size_t>(sv_shape[0] * sv_shape[1]));
    f.features_dtype = h5.holds_float16("/svm/support_vectors") ? "float16" : "float32";
    if (f.features_dtype == "float32") h5.read_rows<float>("/svm/support_vectors", 0, sv_shape[0], m.support_vectors.data());
    else h5.read_floats("/svm/support_vectors", 0, sv_shape[0], m.support_vectors.data());
    m.dual_coef = h5.read<double>("/svm/dual_coef", {one_class ? 1 : k - 1, static_cast<uint64_t>(n_sv)});
    m.rho = h5.read<double>("/svm/rho", {static_cast<uint64_t>(m.n_decisions())});
    m.support_indices = h5.read<int64_t>("/svm/support_indices", {static_cast<uint64_t>(n_sv)});
  }
  for (double s : f.scaler.scale)
    if (!(s > 0) || !std::isfinite(s)) fail_file(path, "/scaler/scale holds a non-positive or non-finite value");
  // A NaN anywhere below poisons decision values silently (every vote goes one way), so a
  // damaged model is refused here rather than reported as a poor accuracy.
  auto require_finite = [&](const char* name, const auto& values) {
    for (auto v : values)
      if (!std::isfinite(v)) fail_file(path, std::string(name) + " holds NaN or Inf");
  };
  require_finite("/scaler/mean", f.scaler.mean);
  require_finite("/svm/dropped_values", f.dropped_values);
  {  // ~313 million floats in the seed pipeline's model (42,901 SVs × 7,296 features): on every core
    const cae::LargeVector<float>& sv = m.support_vectors;
    const int64_t count = static_cast<int64_t>(sv.size());
    int64_t non_finite = 0;
#pragma omp parallel for schedule(static) reduction(+ : non_finite) if (count >= (int64_t{1} << 20))
    for (int64_t i = 0; i < count; ++i) non_finite += !std::isfinite(sv[static_cast<size_t>(i)]);
    if (non_finite) fail_file(path, "/svm/support_vectors holds NaN or Inf");
  }
  require_finite("/svm/dual_coef", m.dual_coef);
  require_finite("/svm/rho", m.rho);
  if (one_class) {
    for (double a : m.dual_coef)
      if (!(a > 0 && a <= 1)) fail_file(path, "/svm/dual_coef of a one-class model holds a multiplier outside (0, 1]");
    f.nu = h5.attr_double("/", "nu");
    if (!(f.nu > 0 && f.nu <= 1)) fail_file(path, "attribute nu must be in (0, 1]");
    if (h5.has("/svm/probA") || h5.has("/svm/probB") || h5.has("/svm/class_weight"))
      fail_file(path, "a one-class model has no probabilities and no class weights");
  }

  f.gamma_spec = h5.has_attr("/", "gamma_spec") ? h5.attr_string("/", "gamma_spec") : "";
  f.C = h5.attr_double("/", "C");
  f.tol = h5.attr_double("/", "tol");
  f.n_train = h5.attr_int("/", "n_train");
  f.fit_seconds = h5.has_attr("/", "fit_seconds") ? h5.attr_double("/", "fit_seconds") : 0.0;
  f.device = h5.has_attr("/", "device") ? h5.attr_string("/", "device") : "";
  // The rule of names where they enter (common/class_names.h): a model is an input as a
  // features file is, whoever wrote it.
  if (h5.has_attr("/", "class_names"))
    f.class_names = cae::checked_class_names(h5.attr_strings("/", "class_names"), path);
  // Files written before augmentation existed have no attribute: their rows were the images.
  f.augment = h5.has_attr("/", "augment") ? h5.attr_string("/", "augment") : "none";
  if (h5.has_attr("/", "encoder_sha256")) {
    f.encoder_sha256 = h5.attr_string("/", "encoder_sha256");
    bool hex = f.encoder_sha256.size() == 64;
    for (char ch : f.encoder_sha256) hex = hex && ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'));
    if (!hex) fail_file(path, "attribute encoder_sha256 is not a sha256 (64 lowercase hex digits)");
  }
  int views = 1;
  try {
    views = cae::ViewSet::parse(f.augment).count();
  } catch (const std::invalid_argument& e) {
    fail_file(path, "attribute augment: " + std::string(e.what()));
  }
  if (f.n_train % views != 0)
    fail_file(path, "augment '" + f.augment + "' needs n_train a multiple of its " + std::to_string(views) +
                        " views (blocks of the images' views), not " + std::to_string(f.n_train));
  // Both or neither: a model with one of the two could not give probabilities.
  if (h5.has("/svm/probA") || h5.has("/svm/probB")) {
    f.prob_A = h5.read<double>("/svm/probA", {k * (k - 1) / 2});
    f.prob_B = h5.read<double>("/svm/probB", {k * (k - 1) / 2});
    require_finite("/svm/probA", f.prob_A);
    require_finite("/svm/probB", f.prob_B);
    if (h5.has_attr("/", "probability_folds"))
      f.probability_folds = static_cast<int>(h5.attr_int("/", "probability_folds"));
    if (h5.has_attr("/", "probability_seed"))
      f.probability_seed = static_cast<uint64_t>(h5.attr_int("/", "probability_seed"));
  }
  if (h5.has("/svm/class_weight")) {
    const std::vector<double> weights = h5.read<double>("/svm/class_weight", {k});
    for (size_t c = 0; c < k; ++c) {
      if (!(weights[c] > 0) || !std::isfinite(weights[c]))
        fail_file(path, "/svm/class_weight holds a weight that is not a finite number > 0");
      f.class_weight[f.model.classes[c]] = weights[c];
    }
    f.class_weight_spec = h5.has_attr("/", "class_weight") ? h5.attr_string("/", "class_weight") : "";
  }
  if (h5.has("/model_selection"))
    f.selection = read_model_selection(h5, path, f.n_train / views);
  return f;
}

void write_libsvm_data(const cae::AtomicOutput& out, const float* X, const int32_t* labels, int64_t n, int dim) {
  std::unique_ptr<FILE, int (*)(FILE*)> fp(fopen(out.temp_path().c_str(), "w"), fclose);
  if (!fp) fail_file(out.final_path(), "cannot create file");
  FILE* o = fp.get();
  for (int64_t r = 0; r < n; ++r) {
    fprintf(o, "%d", labels[r]);
    const float* x = X + r * dim;
    for (int feat = 0; feat < dim; ++feat)
      if (x[feat] != 0) fprintf(o, " %d:%.9g", feat + 1, static_cast<double>(x[feat]));
    fputc('\n', o);
  }
  if (ferror(o) || fflush(o) != 0) fail_file(out.final_path(), "write failed");
}

}  // namespace svm
