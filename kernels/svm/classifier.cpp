#include "kernels/svm/classifier.h"

#include <string>

#include "common/error.h"
#include "common/timer.h"
#include "kernels/svm/preprocess.h"

namespace svm {

void Classifier::fit(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                     cae::Device device, const FitProgress& progress) {
  f_ = ModelFile{};
  f_.scaler = params.standardize ? fit_standard_scaler(X, n, dim) : identity_scaler(dim);
  apply_scaler(f_.scaler, X, n, dim);
  FitParams p;
  p.kernel = params.kernel;
  p.C = params.C;
  p.tol = params.tol;
  p.cache_mb = params.cache_mb;
  p.log_summary = params.log_summary;
  // gamma 'scale' is a property of the scaled matrix with all D features (docs/SVM.md), so
  // it is resolved before the constant features are dropped.
  p.gamma = resolve_gamma(params.gamma, X, n, dim);
  resolved_gamma_ = p.gamma;
  f_.feature_mask = constant_feature_mask(X, n, dim, &f_.dropped_values);
  const int kept = compact_features(X, n, dim, f_.feature_mask);
  if (kept == 0)
    cae::fail_file(params.data_name, "all " + std::to_string(dim) + " features are constant over the training rows");
  f_.model.kernel = p.kernel;
  f_.model.dim = kept;
  f_.gamma_spec = params.gamma;
  f_.C = params.C;
  f_.tol = params.tol;
  f_.n_train = n;
  if (progress.ready) progress.ready(*this);

  cae::Stopwatch clock;
  f_.model = device == cae::Device::gpu ? fit_gpu(X, y, n, kept, p, progress.pair)
                                        : fit_cpu(X, y, n, kept, p, progress.pair);
  f_.fit_seconds = clock.seconds();
  f_.device = cae::device_name(device);
}

void Classifier::scale(float* X, int64_t n) const { apply_scaler(f_.scaler, X, n, n_features()); }

std::vector<double> Classifier::decision_values_scaled(float* X, int64_t n, cae::Device device) const {
  const Model& m = f_.model;
  const int D = n_features();
  // The distances in the dropped features are taken before compact_features overwrites them.
  const std::vector<double> extra = dropped_feature_distance(X, n, D, f_.feature_mask, f_.dropped_values);
  compact_features(X, n, D, f_.feature_mask);
  std::vector<double> dec(static_cast<size_t>(n) * m.n_pairs());
  if (device == cae::Device::gpu)
    decision_values_gpu(m, X, n, dec.data());
  else
    decision_values_cpu(m, X, n, dec.data());
  correct_for_dropped_features(m, extra, dec.data(), n);
  return dec;
}

std::vector<double> Classifier::decision_values(float* X, int64_t n, cae::Device device) const {
  scale(X, n);
  return decision_values_scaled(X, n, device);
}

std::vector<int32_t> Classifier::vote(const std::vector<double>& dec, int64_t n) const {
  return svm::vote(f_.model, dec.data(), n);
}

std::vector<int32_t> Classifier::predict(float* X, int64_t n, cae::Device device) const {
  return vote(decision_values(X, n, device), n);
}

}  // namespace svm
