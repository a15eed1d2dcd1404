#include "kernels/svm/classifier.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/half.h"
#include "common/log.h"
#include "common/timer.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/probability.h"

namespace svm {

void Classifier::fit(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                     cae::Device device, const FitProgress& progress) {
  *this = PreparedSet(X, y, n, dim, params).fit(params, device, progress);
}

PreparedSet::PreparedSet(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params)
    : PreparedSet(RawRows(X), y, n, dim) {
  // gamma 'scale' is a property of the scaled matrix with all D features (docs/SVM.md): it
  // is taken before the constant features are dropped.
  take(prepare_training_rows(X, n, dim, params.standardize), params);
}

Scaler scaler_for(RawRows X, int64_t n, int dim, const ClassifierParams& params) {
  return params.standardize ? fit_standard_scaler(X, n, dim) : identity_scaler(dim);
}

bool PreparedSet::prepared_on_gpu(const ClassifierParams& params, cae::Device device) {
  return device == cae::Device::gpu && params.kind == SvmKind::c_svc && !params.group;
}

bool PreparedSet::prepare_on_gpu(const Scaler& scaler, const ClassifierParams& params) {
  if (n_ <= 0 || dim_ <= 0) return false;
  PreparedRows rows;
  gpu_rows_ = prepare_training_rows_gpu(raw_, y_, n_, dim_, scaler, rows);
  if (!gpu_rows_) return false;
  host_rows_prepared_ = false;
  take(std::move(rows), params);
  return true;
}

PreparedSet::PreparedSet(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                         Scaler scaler, cae::Device device)
    : PreparedSet(RawRows(X), y, n, dim) {
  if (prepared_on_gpu(params, device) && prepare_on_gpu(scaler, params)) return;
  take(prepare_training_rows(X, n, dim, std::move(scaler)), params);
}

std::optional<PreparedSet> PreparedSet::on_gpu(const cae::Half* X16, const int32_t* y, int64_t n, int dim,
                                               const ClassifierParams& params, const Scaler& scaler,
                                               cae::Device device) {
  if (!prepared_on_gpu(params, device)) return std::nullopt;
  PreparedSet set(RawRows(X16), y, n, dim);
  if (!set.prepare_on_gpu(scaler, params)) return std::nullopt;
  return set;
}

void PreparedSet::take(PreparedRows rows, const ClassifierParams& params) {
  rows_ = std::move(rows);
  if (rows_.kept == 0)
    cae::fail_file(params.data_name, "all " + std::to_string(dim_) + " features are constant over the training rows");
}

Classifier PreparedSet::describe(const ClassifierParams& params, cae::Device device) const {
  Classifier c;
  ModelFile& f = c.f_;
  f.scaler = rows_.scaler;
  f.feature_mask = rows_.keep;
  f.dropped_values = rows_.dropped_values;
  c.resolved_gamma_ = resolve_gamma(parse_gamma_spec(params.gamma), rows_.gamma_scale, dim_);
  f.model.kind = params.kind;
  f.model.kernel = params.kernel;
  f.model.dim = rows_.kept;
  if (params.kind == SvmKind::one_class) f.nu = params.nu;
  f.gamma_spec = params.gamma;
  f.C = params.C;
  f.tol = params.tol;
  f.class_weight = params.class_weight;
  f.class_weight_spec = params.class_weight_spec;
  f.n_train = n_;
  f.device = cae::device_name(device);
  return c;
}

FitParams Classifier::fit_params(const ClassifierParams& params) const {
  return FitParams{params.kernel,       params.C,           resolved_gamma_, params.tol, params.class_weight,
                   params.cache_mb,     params.gpu_cache_mb, params.log_summary, params.kind, params.nu};
}

void check_nystroem_fit(SvmKind kind, KernelType kernel, bool group) {
  if (kind != SvmKind::c_svc) throw cae::UsageError("--approx nystroem does not fit --kind one-class");
  if (kernel != KernelType::rbf)
    throw cae::UsageError("--approx nystroem approximates the rbf kernel; --kernel linear has nothing to approximate");
  if (group) throw cae::UsageError("--approx nystroem fits in one process (no --ranks or --gpus)");
}

namespace {
void check_approx_params(const ClassifierParams& params, int64_t n) {
  check_nystroem_fit(params.kind, params.kernel, params.group != nullptr);
  if (params.approx.landmarks > n)
    throw cae::UsageError(params.data_name + ": --approx nystroem:" + std::to_string(params.approx.landmarks) +
                          " needs at most the " + std::to_string(n) + " training rows as landmarks");
}
}  // namespace

NystroemModel PreparedSet::nystroem_map_on(const ClassifierParams& params, double gamma, cae::Device device) const {
  if (device == cae::Device::cpu) return nystroem_map(X_, n_, rows_.kept, gamma, params.approx);
  // The landmark rows as the CPU's map takes them: of the host's prepared rows, or made from
  // the raw rows as the exact fit makes its support vectors (scaled_kept_rows).
  std::vector<int64_t> indices = draw_landmarks(n_, params.approx.landmarks, params.approx.seed);
  cae::LargeVector<float> landmarks(indices.size() * static_cast<size_t>(rows_.kept));
  if (host_rows_prepared_)
    for (size_t l = 0; l < indices.size(); ++l)
      std::copy_n(X_ + indices[l] * rows_.kept, rows_.kept, landmarks.data() + l * static_cast<size_t>(rows_.kept));
  else
    scaled_kept_rows(rows_, raw_, dim_, indices.data(), static_cast<int64_t>(indices.size()), landmarks.data());
  NystroemModel map = nystroem_landmarks(std::move(landmarks), std::move(indices), rows_.kept, gamma,
                                         params.approx.seed);
  nystroem_projection_gpu(map);
  return map;
}

std::vector<Classifier> PreparedSet::fit_approx(const ClassifierParams& params, const std::vector<double>& Cs,
                                                cae::Device device, const FitProgress& progress) const {
  check_approx_params(params, n_);
  if (!host_rows_prepared_ && !gpu_rows_) throw std::logic_error("PreparedSet: its GPU rows were spent");
  Classifier base = describe(params, device);
  std::vector<std::vector<int64_t>> members;
  FitParams p = base.fit_params(params);
  base.f_.model = begin_fit(y_, n_, rows_.kept, p, members);  // classes, kernel, gamma, dim; the checks
  base.f_.model.support_vectors.clear();
  if (progress.ready) progress.ready(base);
  cae::Stopwatch clock;
  const NystroemModel map = nystroem_map_on(params, base.resolved_gamma_, device);
  const double map_seconds = clock.seconds();
  const std::vector<int>& classes = base.f_.model.classes;
  std::vector<NystroemWeights> solved =
      device == cae::Device::cpu
          ? fit_nystroem_classifiers(map, X_, y_, n_, classes, params.class_weight, Cs, params.data_name)
          : fit_nystroem_classifiers_gpu(map, host_rows_prepared_ ? X_ : nullptr, gpu_rows_.get(), y_, n_, classes,
                                         params.class_weight, Cs, params.data_name);
  const double seconds = clock.seconds();
  if (params.log_summary)
    cae::log_info("nystroem: %lld landmarks (seed %llu), rank %d (eigenvalues below %g of the largest dropped), "
                  "%zu classes by least squares on the %s, %.1f s (map %.1f s, rows and solve %.1f s)",
                  static_cast<long long>(map.M), static_cast<unsigned long long>(map.seed), map.rank, kEigenvalueFloor,
                  classes.size(), cae::device_name(device), seconds, map_seconds, seconds - map_seconds);
  std::vector<Classifier> out;
  out.reserve(Cs.size());
  for (size_t c = 0; c < Cs.size(); ++c) {
    Classifier fitted = base;
    fitted.f_.C = Cs[c];
    fitted.f_.fit_seconds = seconds / static_cast<double>(Cs.size());
    fitted.f_.approx = map;  // the landmarks and the projection shared, not copied
    fitted.f_.approx.weights = std::move(solved[c].weights);
    fitted.f_.approx.bias = std::move(solved[c].bias);
    out.push_back(std::move(fitted));
  }
  return out;
}

Classifier PreparedSet::fit(const ClassifierParams& params, cae::Device device, const FitProgress& progress) const {
  if (params.approx.enabled()) return std::move(fit_approx(params, {params.C}, device, progress).front());
  if (!host_rows_prepared_ && !(gpu_rows_ && prepared_on_gpu(params, device)))
    throw std::logic_error("PreparedSet: rows prepared on the GPU serve one GPU fit of one process");
  Classifier c = describe(params, device);
  const FitParams p = c.fit_params(params);
  if (progress.ready) progress.ready(c);
  cae::Stopwatch clock;
  if (gpu_rows_) {
    const std::shared_ptr<DeviceRows> rows = std::move(gpu_rows_);  // spent by the fit
    c.f_.model = fit_gpu_prepared(*rows, raw_, y_, n_, dim_, rows_, p, progress.pair);
  } else if (params.kind == SvmKind::one_class) {
    if (params.group) throw std::invalid_argument("svm: a one-class fit runs in one process");
    c.f_.model = device == cae::Device::gpu ? fit_one_class_gpu(X_, n_, rows_.kept, p)
                                            : fit_one_class_cpu(X_, n_, rows_.kept, p);
  } else if (params.group)
    c.f_.model = fit_on_group(X_, y_, n_, rows_.kept, p, device, *params.group, progress.pair);
  else
    c.f_.model = device == cae::Device::gpu ? fit_gpu(X_, y_, n_, rows_.kept, p, progress.pair)
                                            : fit_cpu(X_, y_, n_, rows_.kept, p, progress.pair);
  c.f_.fit_seconds = clock.seconds();
  return c;
}

std::vector<Classifier> PreparedSet::fit_each_C(const ClassifierParams& params, const std::vector<double>& Cs,
                                                cae::Device device) const {
  if (params.approx.enabled()) return fit_approx(params, Cs, device, {});
  std::vector<Classifier> out;
  out.reserve(Cs.size());
  if (!host_rows_prepared_) throw std::logic_error("PreparedSet: rows prepared on the GPU serve one fit");
  const bool one_matrix = device == cae::Device::gpu && Cs.size() >= 2;
  for (double C : Cs) {
    ClassifierParams p = params;
    p.C = C;
    out.push_back(one_matrix ? describe(p, device) : fit(p, device));
  }
  if (!one_matrix) return out;
  const FitParams fp = out.front().fit_params(params);
  cae::Stopwatch clock;
  std::vector<Model> models = fit_gpu_each_C(X_, y_, n_, rows_.kept, fp, Cs);
  const double seconds = clock.seconds() / double(Cs.size());
  for (size_t c = 0; c < Cs.size(); ++c) {
    out[c].f_.model = std::move(models[c]);
    out[c].f_.fit_seconds = seconds;
  }
  return out;
}

PreparedQueries PreparedSet::prepare_queries(float* X, int64_t n) const {
  apply_scaler(rows_.scaler, X, n, dim_);
  PreparedQueries q;
  q.X = X;
  q.n = n;
  // The distances in the dropped features are taken before compact_features overwrites them.
  q.dropped_distance = dropped_feature_distance(X, n, dim_, rows_.keep, rows_.dropped_values);
  compact_features(X, n, dim_, rows_.keep);
  return q;
}

std::vector<double> Classifier::decision_values(const PreparedQueries& q, cae::Device device) const {
  return decision_values_kept(q.X, q.dropped_distance, q.n, device);
}

std::vector<double> Classifier::decision_values_kept(const float* X, const std::vector<double>& dropped_distance,
                                                     int64_t n, cae::Device device) const {
  const Model& m = f_.model;
  std::vector<double> dec(static_cast<size_t>(n) * m.n_decisions());
  if (f_.is_approx()) {
    // The dropped features' factor goes on the kernel values themselves (nystroem_features).
    const double* dropped = dropped_distance.empty() ? nullptr : dropped_distance.data();
    if (device == cae::Device::gpu)
      nystroem_decision_values_gpu(f_.approx, X, n, dropped, dec.data());
    else
      nystroem_decision_values(f_.approx, X, n, dropped, dec.data());
    return dec;
  }
  if (device == cae::Device::gpu)
    decision_values_gpu(m, X, n, dec.data());
  else
    decision_values_cpu(m, X, n, dec.data());
  correct_for_dropped_features(m, dropped_distance, dec.data(), n);
  return dec;
}

void Classifier::scale(float* X, int64_t n) const { apply_scaler(f_.scaler, X, n, n_features()); }

std::vector<double> Classifier::decision_values_scaled(float* X, int64_t n, cae::Device device) const {
  const int D = n_features();
  // The distances in the dropped features are taken before compact_features overwrites them.
  const std::vector<double> extra = dropped_feature_distance(X, n, D, f_.feature_mask, f_.dropped_values);
  compact_features(X, n, D, f_.feature_mask);
  return decision_values_kept(X, extra, n, device);
}

std::vector<double> Classifier::decision_values(float* X, int64_t n, cae::Device device) const {
  scale(X, n);
  return decision_values_scaled(X, n, device);
}

std::vector<int32_t> Classifier::vote(const std::vector<double>& dec, int64_t n) const {
  if (f_.model.kind == SvmKind::one_class) return one_class_labels(dec.data(), n);
  return svm::vote(f_.model, dec.data(), n);
}

std::vector<double> average_views(const std::vector<double>& dec, int64_t n, int pairs, int views) {
  const size_t row = static_cast<size_t>(pairs), rows = static_cast<size_t>(n);
  if (views < 1 || dec.size() != rows * row * static_cast<size_t>(views))
    throw std::invalid_argument("average_views: " + std::to_string(dec.size()) + " decision values are not " +
                                std::to_string(views) + " views of " + std::to_string(n) + " rows x " +
                                std::to_string(pairs) + " pairs");
  std::vector<double> avg(dec.begin(), dec.begin() + static_cast<std::ptrdiff_t>(rows * row));
  for (int v = 1; v < views; ++v) {
    const double* d = dec.data() + static_cast<size_t>(v) * rows * row;
    for (size_t i = 0; i < rows * row; ++i) avg[i] += d[i];
  }
  if (views > 1)
    for (double& a : avg) a /= views;
  return avg;
}

void Classifier::set_probability(std::vector<double> A, std::vector<double> B, int folds, uint64_t seed) {
  const size_t pairs = static_cast<size_t>(f_.model.n_pairs());
  if (A.size() != pairs || B.size() != pairs)
    throw std::invalid_argument("set_probability: " + std::to_string(A.size()) + " and " + std::to_string(B.size()) +
                                " sigmoids for " + std::to_string(pairs) + " pairs");
  f_.prob_A = std::move(A);
  f_.prob_B = std::move(B);
  f_.probability_folds = folds;
  f_.probability_seed = seed;
}

std::vector<double> Classifier::probabilities(const std::vector<double>& decision_values, int64_t n) const {
  if (!has_probability()) throw std::logic_error("probabilities: the model was fitted without --probability");
  return probabilities_from_decisions(decision_values, n, static_cast<int>(f_.model.classes.size()), f_.prob_A,
                                      f_.prob_B);
}

namespace {
// Rounds `sv` to float16 values in place, unless one is beyond float16's range (then false).
bool round_to_float16(cae::LargeVector<float>& sv) {
  const int64_t n = static_cast<int64_t>(sv.size());
  float largest = 0;
#pragma omp parallel for schedule(static) reduction(max : largest) if (n >= (int64_t{1} << 20))
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::fabs(sv[static_cast<size_t>(i)]));
  if (!(largest < cae::kHalfOverflow)) return false;
  cae::round_to_half(sv.data(), sv.size());
  return true;
}
}  // namespace

void Classifier::keep_float16() {
  if (f_.is_approx()) {
    // A nystroem model's landmarks are its training rows as the support vectors are the SVM's;
    // they are shared (nystroem.h), so the rounded ones are a copy of their own.
    auto rounded = std::make_shared<cae::LargeVector<float>>(*f_.approx.landmarks);
    if (!round_to_float16(*rounded)) return;
    f_.approx.landmarks = std::move(rounded);
  } else if (!round_to_float16(f_.model.support_vectors)) {
    return;
  }
  f_.features_dtype = "float16";
}

}  // namespace svm
