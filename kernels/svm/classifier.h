// svm::Classifier — the SVM stage as one object, libsvm-style: fit, decision values,
// predict, save, load, export. It owns the order of the steps, which is what makes its
// predictions equal scikit-learn's StandardScaler + SVC (docs/SVM.md):
//
//   fit:      scale (fit the scaler) → resolve gamma on the scaled rows → mask constant
//             features → solve (CPU or GPU)
//   predict:  scale → dropped-feature distances → mask → kernel decision values (CPU or
//             GPU) → dropped-feature correction → one-vs-one vote
//
// svm-fit, svm-eval and the tests call this instead of spelling the chain out.
//
// Rows are passed as a writable float pointer and used as scratch: they are scaled and
// compacted in place (the training matrix of CIFAR-10 features is 1.6 GB; a copy would
// double the peak memory). Callers that need the rows afterwards pass a copy.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/svm.h"

namespace cae {
class GroupExchange;
}

namespace svm {

struct ClassifierParams {
  // one_class: the labels are ignored, nu replaces C, and the fit runs in one process (a
  // group is std::invalid_argument); predictions are +1 inside, −1 outside.
  SvmKind kind = SvmKind::c_svc;
  double nu = 0.5;
  KernelType kernel = KernelType::rbf;
  double C = 10.0;
  std::string gamma = "scale";  // "scale", "auto", "<m>x" or a number > 0 (parse_gamma_spec)
  double tol = 1e-3;            // KKT tolerance, as libsvm's -e
  ClassWeights class_weight;    // C of class c is C · w_c (resolve_class_weights); empty: all 1
  std::string class_weight_spec = "none";  // what the weights came from, saved with the model
  bool standardize = true;                 // false: the identity scaler (svm-fit --scale none)
  int64_t cache_mb = 2048;   // FitParams::cache_mb
  int64_t gpu_cache_mb = 0;  // FitParams::gpu_cache_mb
  std::string data_name = "training data";  // names the rows in error messages (a file)
  bool log_summary = true;                   // the solver's one-line summary on stderr
  // svm-fit --approx nystroem:M (kernels/svm/approx/nystroem.h): Nyström features of M
  // landmarks and a least-squares classifier instead of the SVM, on the rows prepared as for
  // it (c-svc, rbf, the CPU, one process; cae::UsageError otherwise). Off: landmarks 0.
  ApproxSpec approx;
  // A group of ranks sharing the work (group_fit.h), or null: this process alone. fit()
  // splits the class pairs; cross_validate the (fold, gamma) cells; fit_sigmoids the folds.
  // Only rank 0's results are whole: the other ranks' models and sigmoids are not to be saved.
  cae::GroupExchange* group = nullptr;
};

class Classifier;

// What a fit of Nyström features refuses, the one list (cae::UsageError): the approximation
// is of the RBF one-vs-one classifier, and groups are not written yet (issue 63). svm-fit
// asks it before reading anything (plan_approx with what it knows then, run_fit with the
// group); the library's fit asks it again for its callers.
void check_nystroem_fit(SvmKind kind, KernelType kernel, bool group);

// The scaler a PreparedSet of these params fits on X [n, dim]: StandardScaler's, or the
// identity for params.standardize false.
Scaler scaler_for(RawRows X, int64_t n, int dim, const ClassifierParams& params);

// Query rows scaled and compacted in place as a PreparedSet's training rows were, with their
// squared distance in the dropped features (the exact correction of the decision values).
struct PreparedQueries {
  const float* X = nullptr;  // [n, kept]
  int64_t n = 0;
  std::vector<double> dropped_distance;
};

// Test-time augmentation: dec holds [views·n, pairs] decision values, row i + j·n being view
// j of image i (svm-eval --tta flip: the originals, then their mirrors); returns [n, pairs],
// each image's decision values averaged elementwise over its views. Voting (and
// probabilities) then work on the averages.
std::vector<double> average_views(const std::vector<double>& dec, int64_t n, int pairs, int views);

// What fit reports while it runs: `ready` once the rows are scaled and masked, just before
// the solver starts (the classifier then knows gamma, the kept features and the settings in
// file(): C, gamma_spec, tol, class weights, n_train); `pair` after every one-vs-one pair.
// Either may be empty.
struct FitProgress {
  std::function<void(const Classifier&)> ready;
  PairCallback pair;
};

class Classifier {
 public:
  Classifier() = default;
  explicit Classifier(ModelFile f) : f_(std::move(f)), resolved_gamma_(f_.model.gamma) {}

  // X: [n, dim] (scratch, see above); y: n labels with at least two distinct classes.
  // Throws cae::UsageError on a bad gamma spec, std::runtime_error("<data_name>: ...") when
  // every feature is constant, std::invalid_argument on bad solver parameters.
  void fit(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params, cae::Device device,
           const FitProgress& progress = {});

  // Decision values of query rows prepared by the PreparedSet this model was fitted on.
  std::vector<double> decision_values(const PreparedQueries& q, cae::Device device) const;

  // X: [n, n_features()] unscaled rows (scratch). Decision values [n, model().n_decisions()]
  // (svm.h); predictions are class labels, or +1 / −1 (inside / outside) for a one-class model.
  std::vector<double> decision_values(float* X, int64_t n, cae::Device device = cae::Device::cpu) const;
  std::vector<int32_t> vote(const std::vector<double>& dec, int64_t n) const;

  // The two halves of decision_values, for a caller that needs the scaled rows in between
  // (svm-eval --export-libsvm-data): scale() standardises in place;
  // decision_values_scaled() does the rest on rows scale() returned.
  void scale(float* X, int64_t n) const;
  std::vector<double> decision_values_scaled(float* X, int64_t n, cae::Device device) const;

  // The svm-model file: datasets and attributes (format and provenance are the caller's),
  // and reading one back with every check of read_model_file.
  void save(cae::Hdf5Writer& w) const { write_model_file(w, f_); }
  static Classifier load(const std::string& path) { return Classifier(read_model_file(path)); }

  void set_class_names(std::vector<std::string> names) { f_.class_names = std::move(names); }
  // How the caller made the training rows ("none", "flip"; ModelFile::augment): recorded,
  // not applied — the Classifier fits whatever rows it is given. fit() resets it to "none".
  void set_augment(std::string augment) { f_.augment = std::move(augment); }
  // The encoder of the training features (ModelFile::encoder_sha256): recorded for the checks
  // of svm-eval and classify; "" = unknown.
  void set_encoder_sha256(std::string sha) { f_.encoder_sha256 = std::move(sha); }
  // The training rows were float16 values (ae-encode's default storage): rounds the support
  // vectors — scaled, so no longer float16 values — to float16, which save() then stores in
  // half the bytes, and records it (ModelFile::features_dtype). Their rounding (half a unit
  // in the last place: 2^-11 relative, 2^-25 near 0) is the size of the features' own. Call
  // before predicting with the model; keeps float32 if a support vector is beyond float16's
  // range (a z-score of n rows is at most √n).
  void keep_float16();

  // Probability estimates, libsvm's -b 1 (probability.h): set_probability stores the pairs'
  // sigmoids that fit_sigmoids found ([k(k−1)/2] each, pair order; fit() clears them);
  // probabilities() turns decision values [n, k(k−1)/2] (decision_values, or their TTA
  // averages) into class probabilities [n, k] row-major, columns in model().classes order,
  // rows summing to 1. Throws std::logic_error when the model has none.
  void set_probability(std::vector<double> A, std::vector<double> B, int folds, uint64_t seed);
  bool has_probability() const { return f_.has_probability(); }
  std::vector<double> probabilities(const std::vector<double>& decision_values, int64_t n) const;
  // The cross-validation that chose this model's C and gamma (train.h: svm::train);
  // saved as /model_selection. fit() clears it.
  void set_model_selection(ModelSelection s) { f_.selection = std::move(s); }
  const ModelSelection& model_selection() const { return f_.selection; }

  const ModelFile& file() const { return f_; }
  // A nystroem model (svm-fit --approx): not a libsvm model.
  bool is_approx() const { return f_.is_approx(); }
  // The rows of one block of its CPU decision values (decision_block_rows, or the Nyström
  // features' nystroem_block_rows): where a caller that splits the rows cuts them.
  int64_t decision_block_rows() const {
    return is_approx() ? nystroem_block_rows(f_.approx.M) : svm::decision_block_rows(f_.model);
  }
  const Model& model() const { return f_.model; }
  // The number the gamma spec resolved to; the model keeps it only for rbf (libsvm's linear
  // model has no gamma), svm-fit reports it for either kernel.
  double resolved_gamma() const { return resolved_gamma_; }
  int n_features() const { return f_.n_features(); }  // D, what inputs must have
  int n_features_kept() const { return f_.model.dim; }
  double fit_seconds() const { return f_.fit_seconds; }

 private:
  friend class PreparedSet;
  std::vector<double> decision_values_kept(const float* X, const std::vector<double>& dropped_distance, int64_t n,
                                           cae::Device device) const;
  FitParams fit_params(const ClassifierParams& params) const;  // after PreparedSet::describe
  ModelFile f_;
  double resolved_gamma_ = 0;
};

// A training set scaled and masked once, for many solves that differ only in C, gamma or the
// class weights: cross-validation prepares each fold once and every (gamma, C) solves on it;
// Classifier::fit is one PreparedSet and one fit.
class PreparedSet {
 public:
  // Scales X [n, dim] in place and compacts it to [n, kept()] (of params only standardize and
  // data_name matter). X and y are kept by pointer: they must outlive the set. Throws
  // std::runtime_error("<data_name>: ...") when every feature is constant.
  PreparedSet(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params);
  // The same for a fit on `device`, with the scaler already fitted on X (scaler_for): a GPU
  // fit of one process (c-svc, no group) prepares the rows on the GPU
  // (prepare_training_rows_gpu), where they stay for its one fit, and leaves X as it is;
  // otherwise, or when the GPU lacks the room, as above.
  PreparedSet(float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params, Scaler scaler,
              cae::Device device);
  // The same GPU preparation for float16 rows X16 [n, dim] (a features file's,
  // ae::FeatureSplit::X16) with the scaler fitted on them: they go up in half the bytes and
  // are widened on the GPU — the same set as of their floats. Empty where the GPU does not
  // prepare them (another device or kind, a group, a GPU without the room): the caller then
  // widens them and takes the constructor above.
  static std::optional<PreparedSet> on_gpu(const cae::Half* X16, const int32_t* y, int64_t n, int dim,
                                           const ClassifierParams& params, const Scaler& scaler, cae::Device device);
  // A Classifier of params' C, gamma and weights on these rows (read only); progress as for
  // Classifier::fit.
  Classifier fit(const ClassifierParams& params, cae::Device device, const FitProgress& progress = {}) const;
  // fit() for every C of `Cs` (params.C ignored). On the GPU one kernel matrix serves every C
  // (fit_gpu_each_C); the models equal separate fits'.
  std::vector<Classifier> fit_each_C(const ClassifierParams& params, const std::vector<double>& Cs,
                                     cae::Device device) const;
  // Query rows [n, dim], scaled and compacted in place for any model fitted on this set.
  PreparedQueries prepare_queries(float* X, int64_t n) const;
  int kept() const { return rows_.kept; }

 private:
  PreparedSet(RawRows X, const int32_t* y, int64_t n, int dim) : dim_(dim), X_(X.f32), raw_(X), y_(y), n_(n) {}
  // Whether a fit of these params on `device` is one the GPU prepares its rows for.
  static bool prepared_on_gpu(const ClassifierParams& params, cae::Device device);
  // Takes the rows prepare_training_rows_gpu made of raw_, or false when the GPU lacks the room.
  bool prepare_on_gpu(const Scaler& scaler, const ClassifierParams& params);
  Classifier describe(const ClassifierParams& params, cae::Device device) const;  // a fit's fields before solving
  // The Nyström map of params.approx on these rows, made on `device`.
  NystroemModel nystroem_map_on(const ClassifierParams& params, double gamma, cae::Device device) const;
  // fit / fit_each_C of a params.approx fit: one map and one pass over the rows for every C,
  // on the host's prepared rows or the GPU's (which it reads, not spends).
  std::vector<Classifier> fit_approx(const ClassifierParams& params, const std::vector<double>& Cs, cae::Device device,
                                     const FitProgress& progress) const;
  PreparedRows rows_;  // scaler, gamma 'scale', mask, dropped values, kept count
  int dim_ = 0;
  // Rows prepared on the GPU (raw_ then holds the raw rows), until the one exact fit they
  // serve; Nyström fits only read them.
  mutable std::shared_ptr<DeviceRows> gpu_rows_;
  bool host_rows_prepared_ = true;
  void take(PreparedRows rows, const ClassifierParams& params);
  const float* X_;  // float rows as given; a host preparation leaves them scaled and compacted, [n, kept]
  RawRows raw_;     // the rows as given: the support vectors of a GPU-prepared fit
  const int32_t* y_;
  int64_t n_;
};

}  // namespace svm
