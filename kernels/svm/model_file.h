// The svm-model file (format "svm-model", docs/FORMATS.md): a fitted Classifier on disk —
// the libsvm-layout model, the scaler, the constant-feature mask and the settings it was fit
// with — and export to libsvm's own text formats. svm::Classifier (classifier.h) saves and
// loads through these; svm-fit and svm-eval go through the Classifier.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/hdf5_io.h"
#include "kernels/svm/approx/nystroem.h"
#include "kernels/svm/metrics.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/svm.h"

namespace svm {

// What svm-fit --cv found (model_selection.h computes it): the cross-validated accuracy and
// score of every (C, gamma) pair tried, C-major, and which pair became the model. folds == 0:
// no cross-validation was run and the file has no /model_selection.
struct ModelSelection {
  int folds = 0;
  uint64_t seed = 0;
  std::vector<double> C;               // [nC]
  std::vector<std::string> gamma;      // [nG] the specs: "scale", "0.5x", "auto", "0.01"
  std::vector<double> gamma_resolved;  // [nG, folds] each spec's number on each fold's training rows
  std::vector<double> cv_accuracy;     // [nC, nG] right predictions over all held-out rows / n
  std::vector<double> fold_accuracy;   // [nC, nG, folds]
  // What chose the pair (svm-fit --cv-scoring): cv_score is the table the best pair
  // maximises, fold_score its per-fold numbers. accuracy: cv_score is cv_accuracy (pooled);
  // balanced_accuracy and macro_f1: cv_score is the mean of fold_score over the folds, as
  // scikit-learn's GridSearchCV takes it (docs/SVM.md).
  Scoring scoring = Scoring::accuracy;
  std::vector<double> cv_score;    // [nC, nG]
  std::vector<double> fold_score;  // [nC, nG, folds]
  // The fold that held out each training image (the first n_train / views rows), for
  // reproducing the search elsewhere (scikit-learn's PredefinedSplit); empty in files
  // written before it was stored.
  std::vector<int32_t> image_fold;
  int best_C = 0, best_gamma = 0;      // indices into C and gamma
  double seconds = 0;                  // the whole cross-validation
  bool empty() const { return folds == 0; }
  size_t best_cell() const { return static_cast<size_t>(best_C) * gamma.size() + static_cast<size_t>(best_gamma); }
  double best_accuracy() const { return cv_accuracy[best_cell()]; }
  double best_score() const { return cv_score[best_cell()]; }
};

struct ModelFile {
  Model model;
  Scaler scaler;
  std::vector<uint8_t> feature_mask;  // [D]
  std::vector<float> dropped_values;  // [D − D_kept], scaled training value of each dropped feature
  std::string gamma_spec = "scale";
  double C = 10, tol = 1e-3;
  double nu = 0;  // a one-class model's ν (attribute nu); unused by c-svc
  // svm-fit --class-weight: C of class c was C · class_weight[c] in every fit of the run
  // (cross-validation and probability folds included); empty: every weight 1. Saved as
  // /svm/class_weight [k] in model().classes order; the spec ("balanced", "cat:2,dog:0.5")
  // as the attribute class_weight.
  ClassWeights class_weight;
  std::string class_weight_spec = "none";
  int64_t n_train = 0;
  double fit_seconds = 0;
  std::string device = "cpu";
  std::vector<std::string> class_names;
  // How the training rows were made: a cae::ViewSet spec, "none", "flip", "shift:K" or
  // "flip,shift:K" (svm-fit --augment: V = its count() blocks of n_train / V rows, block j
  // the images' view j, so with "flip" a support index i >= n_train / 2 is the mirror of
  // image i - n_train / 2).
  std::string augment = "none";
  // sha256 of the autoencoder that encoded the training features (their provenance), so
  // svm-eval and classify can refuse features of another encoder; "" when unknown.
  std::string encoder_sha256;
  // The training features' storage, "float32" or "float16" (ae-encode's default). A model
  // fitted on float16 features keeps its support vectors as float16 values (saved so: half
  // the bytes), and classify rounds its codes to float16 as ae-encode would have stored them.
  std::string features_dtype = "float32";
  ModelSelection selection;
  // libsvm's -b 1 (svm-fit --probability, probability.h): each pair's sigmoid
  // P(first class | f) = 1 / (1 + exp(A f + B)), [k(k−1)/2] in pair order; empty without.
  // The sigmoids were fitted on decision values of a probability_folds-fold cross-validation
  // (seed probability_seed).
  std::vector<double> prob_A, prob_B;
  int probability_folds = 0;
  uint64_t probability_seed = 0;
  bool has_probability() const { return !prob_A.empty(); }
  int n_features() const { return static_cast<int>(feature_mask.size()); }
  // Classifier kind nystroem (svm-fit --approx nystroem:M, kernels/svm/approx/nystroem.h):
  // Nyström features and a least-squares classifier, saved as /approx; model holds the
  // classes, gamma and dim but no support vectors, coefficients or rho. approx.M == 0: an
  // exact model (c-svc or one-class).
  NystroemModel approx;
  bool is_approx() const { return approx.M > 0; }
};

// The file's kind attribute: "c-svc", "one-class" or "nystroem".
const char* classifier_kind_name(const ModelFile& f);

// Datasets and SVM attributes (format and provenance are the caller's).
void write_model_file(cae::Hdf5Writer& w, const ModelFile& f);
// Checks format, dtypes, shapes and their consistency, and that every number is finite.
ModelFile read_model_file(const std::string& path);

// "label index:value ..." per row of libsvm's data format (what svm-predict reads); writes
// out.temp_path(), the caller commits.
void write_libsvm_data(const cae::AtomicOutput& out, const float* X, const int32_t* labels, int64_t n, int dim);

}  // namespace svm
