#include "kernels/svm/classifier.h"

#include <cstddef>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/timer.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/probability.h"

namespace svm {

void Classifier::fit(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                     cae::Device device, const FitProgress& progress) {
  const PreparedRows rows = prepare(X, n, dim, params);
  fit_prepared(rows, X, y, n, params, device, progress);
}

PreparedRows Classifier::prepare(float* X, int64_t n, int dim, const ClassifierParams& params) {
  PreparedRows r;
  r.dim = dim;
  r.scaler = params.standardize ? fit_standard_scaler(X, n, dim) : identity_scaler(dim);
  apply_scaler(r.scaler, X, n, dim);
  // gamma 'scale' is a property of the scaled matrix with all D features (docs/SVM.md), so
  // it is taken before the constant features are dropped.
  r.gamma_scale = gamma_scale(X, n, dim);
  r.feature_mask = constant_feature_mask(X, n, dim, &r.dropped_values);
  r.kept = compact_features(X, n, dim, r.feature_mask);
  if (r.kept == 0)
    cae::fail_file(params.data_name, "all " + std::to_string(dim) + " features are constant over the training rows");
  return r;
}

std::vector<Classifier> Classifier::fit_prepared_each_C(const PreparedRows& rows, const float* X, const int32_t* y,
                                                       int64_t n, const ClassifierParams& params,
                                                       const std::vector<double>& Cs, cae::Device device) {
  std::vector<Classifier> out(Cs.size());
  if (device != cae::Device::gpu || Cs.size() < 2) {
    for (size_t c = 0; c < Cs.size(); ++c) {
      ClassifierParams p = params;
      p.C = Cs[c];
      out[c].fit_prepared(rows, X, y, n, p, device);
    }
    return out;
  }
  // Everything but the solve as fit_prepared sets it, for each C; then one solve for all.
  for (size_t c = 0; c < Cs.size(); ++c) {
    ClassifierParams p = params;
    p.C = Cs[c];
    out[c].describe_fit(rows, n, p, device);
  }
  FitParams fp = out.front().fit_params(params);
  cae::Stopwatch clock;
  std::vector<Model> models = fit_gpu_each_C(X, y, n, rows.kept, fp, Cs);
  const double seconds = clock.seconds() / double(Cs.size());
  for (size_t c = 0; c < Cs.size(); ++c) {
    out[c].f_.model = std::move(models[c]);
    out[c].f_.fit_seconds = seconds;
  }
  return out;
}

// The model file's fields a fit fills before solving.
void Classifier::describe_fit(const PreparedRows& rows, int64_t n, const ClassifierParams& params, cae::Device device) {
  f_ = ModelFile{};
  f_.scaler = rows.scaler;
  f_.feature_mask = rows.feature_mask;
  f_.dropped_values = rows.dropped_values;
  resolved_gamma_ = resolve_gamma(parse_gamma_spec(params.gamma), rows.gamma_scale, rows.dim);
  f_.model.kernel = params.kernel;
  f_.model.dim = rows.kept;
  f_.gamma_spec = params.gamma;
  f_.C = params.C;
  f_.tol = params.tol;
  f_.n_train = n;
  f_.device = cae::device_name(device);
}

FitParams Classifier::fit_params(const ClassifierParams& params) const {
  FitParams p;
  p.kernel = params.kernel;
  p.C = params.C;
  p.tol = params.tol;
  p.cache_mb = params.cache_mb;
  p.log_summary = params.log_summary;
  p.gamma = resolved_gamma_;
  return p;
}

void Classifier::fit_prepared(const PreparedRows& rows, const float* X, const int32_t* y, int64_t n,
                              const ClassifierParams& params, cae::Device device, const FitProgress& progress) {
  describe_fit(rows, n, params, device);
  const FitParams p = fit_params(params);
  if (progress.ready) progress.ready(*this);

  cae::Stopwatch clock;
  if (params.group)
    f_.model = fit_on_group(X, y, n, rows.kept, p, device, *params.group, progress.pair);
  else
    f_.model = device == cae::Device::gpu ? fit_gpu(X, y, n, rows.kept, p, progress.pair)
                                          : fit_cpu(X, y, n, rows.kept, p, progress.pair);
  f_.fit_seconds = clock.seconds();
}

std::vector<double> Classifier::prepare_queries(const PreparedRows& rows, float* X, int64_t n) {
  apply_scaler(rows.scaler, X, n, rows.dim);
  // The distances in the dropped features are taken before compact_features overwrites them.
  std::vector<double> extra = dropped_feature_distance(X, n, rows.dim, rows.feature_mask, rows.dropped_values);
  compact_features(X, n, rows.dim, rows.feature_mask);
  return extra;
}

std::vector<double> Classifier::decision_values_prepared(const float* X, const std::vector<double>& dropped_distance,
                                                         int64_t n, cae::Device device) const {
  const Model& m = f_.model;
  std::vector<double> dec(static_cast<size_t>(n) * m.n_pairs());
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
  return decision_values_prepared(X, extra, n, device);
}

std::vector<double> Classifier::decision_values(float* X, int64_t n, cae::Device device) const {
  scale(X, n);
  return decision_values_scaled(X, n, device);
}

std::vector<int32_t> Classifier::vote(const std::vector<double>& dec, int64_t n) const {
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

std::vector<int32_t> Classifier::predict(float* X, int64_t n, cae::Device device) const {
  return vote(decision_values(X, n, device), n);
}

}  // namespace svm
