// Model selection for svm::Classifier: stratified K-fold cross-validation and the (C, gamma)
// grid — libsvm's `svm-train -v K` and its grid.py in one call (svm-fit --cv, docs/SVM.md).
//
// Every fit goes through Classifier::fit on the training folds alone, so the scaler, the
// resolved gamma ('scale' is a property of the scaled training rows) and the constant-feature
// mask are fitted without the held-out fold: the accuracy is that of the whole pipeline on
// rows it has not seen, as svm-eval measures on the test split. The held-out fold is
// predicted through Classifier::predict, on the CPU or the GPU like any other prediction.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/device.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/resume.h"

namespace svm {

// fold[r] in [0, k) for each of the n rows. Each class's rows are shuffled (seeded; the same
// seed gives the same folds on every platform) and dealt to the folds in turn, the dealing
// carrying on from class to class, so every fold holds ⌊n_c/k⌋ or ⌈n_c/k⌉ rows of each class c
// and the fold sizes differ by at most one. Needs 2 ≤ k (check_cv_folds says the rest).
std::vector<int> stratified_folds(const int32_t* y, int64_t n, int k, uint64_t seed);

// stratified_folds over images that appear as several rows (svm-fit --augment flip): the n
// rows are `views` blocks of n / views, row i + j·(n / views) being view j of image i (the
// original, then its mirror), all with image i's label. The images are dealt to folds by
// stratified_folds on the first block, and every view goes to its image's fold: a mirror in
// the training part of a fold whose held-out part has its original would let the model
// see (nearly) the held-out image, and the CV accuracy would flatter it. views == 1 is
// stratified_folds. std::invalid_argument unless n is a multiple of views and the views'
// labels agree.
std::vector<int> grouped_folds(const int32_t* y, int64_t n, int views, int k, uint64_t seed);

// One fold's rows in row order, so each fit sees its rows as a plain fit would: the training
// part (every view of the other folds' images) and the held-out part (the fold's images,
// first view only: the originals, as svm-eval predicts the test split; a mirror of a
// held-out image is neither trained on nor scored).
struct FoldRows {
  std::vector<int64_t> train_rows, held_rows;
  std::vector<float> train_X, held_X;  // [rows, dim]
  std::vector<int32_t> train_y, held_y;
  int64_t n_train() const { return static_cast<int64_t>(train_rows.size()); }
  int64_t n_held() const { return static_cast<int64_t>(held_rows.size()); }
};

// The folds of grouped_folds(y, n, views, folds, seed) over X [n, dim] (read, not changed;
// X and y must outlive the split): cross-validation and the probability sigmoids walk them.
class FoldSplit {
 public:
  FoldSplit(const float* X, const int32_t* y, int64_t n, int dim, int views, int folds, uint64_t seed);
  // The same over n rows picked from a larger matrix: row r of the split is X's row
  // x_rows[r] (x_rows must outlive the split; y[r] is its label). FoldRows' train_rows and
  // held_rows still count the split's rows 0..n−1. --cv-scoring log_loss splits an outer
  // fold's training part this way, reading the caller's rows instead of a copy of them.
  FoldSplit(const float* X, const int64_t* x_rows, const int32_t* y, int64_t n, int dim, int views, int folds,
            uint64_t seed);
  // Fold f's rows into `out` (its buffers are reused from fold to fold).
  void rows(int f, FoldRows& out) const;
  int64_t images() const { return n_ / views_; }
  // The fold that holds out image i, for i < images().
  int fold_of_image(int64_t i) const { return fold_[static_cast<size_t>(i)]; }

 private:
  const float* X_;
  const int64_t* x_rows_;  // null: row r is X's row r
  const int32_t* y_;
  int64_t n_;
  int dim_, views_;
  std::vector<int> fold_;
};

// UsageError unless 2 ≤ k ≤ the smallest class's row count; the message names that class
// (class_names[label] when there is one).
void check_cv_folds(int k, const int32_t* y, int64_t n, const std::vector<std::string>& class_names);

// Comma-separated --C and --gamma lists: "1,10,100"; "scale,auto,0.5x,2x,0.01". Each C must
// be a finite number > 0, each gamma a spec parse_gamma_spec accepts; duplicates are refused
// (they would make the table's best pair ambiguous). UsageError naming the option otherwise.
std::vector<double> parse_C_list(const std::string& text);
std::vector<std::string> parse_gamma_list(const std::string& text);

// svm-fit --cv-scoring: what cross_validate picks the pair by (parse_scoring). A
// cae::UsageError naming the option for a name it does not know, and for anything but
// accuracy (the default) without --cv (`cv_folds` 0).
Scoring cv_scoring_option(const std::string& name, int cv_folds);

// After every fit of the cross-validation: fits done of the total (for a progress bar).
using CvProgress = std::function<void(int fits_done, int fits_total)>;

// Cross-validates every (C, gamma) pair of the lists with grouped_folds(y, n, views, folds,
// seed) (stratified_folds when views == 1): for each fold, a Classifier is fitted on the
// other folds' rows, every view (params with C and gamma replaced), and predicts the
// held-out images' first view — the originals, as svm-eval predicts the test split. X [n,
// dim] is read, not changed (each fold gets a copy).
//
// Each (fold, C, gamma) keeps the confusion matrix of its held-out images over the classes
// of y; the table's numbers all come from those: cv_accuracy pools the folds (right
// predictions over the n / views images, libsvm's -v), fold_accuracy and fold_score are
// each fold's own, and cv_score is what the best pair maximises — for `scoring` accuracy
// the pooled accuracy, for balanced_accuracy and macro_f1 the mean of the folds' scores
// (scikit-learn's GridSearchCV). log_loss also fits, per (fold, C, gamma), the probability
// model of the fold's training part (fit_sigmoids_each_C: kLibsvmProbabilityFolds folds seeded
// by `seed`) and scores the held-out images' probabilities by −log_loss; cv_score is the
// mean over the folds. Refused (runtime_error naming params.data_name) before any fit when a
// fold's training part holds fewer than 2 images of a class. Ties go to the first in C-major order (smaller C index,
// then smaller gamma index), so listing C and gamma in increasing order prefers the
// simpler model on a tie.
//
// The loops run fold → gamma → C. The rows a fit sees (scaled, masked) depend only on the
// fold, so each fold is prepared once (PreparedSet) and every pair
// solves on it: the same arithmetic as a plain fit per pair, without 60 scalings of 40,000
// rows. The kernel matrix depends on the fold and gamma only: on the GPU each (fold, gamma)
// builds it once and solves every C on it (PreparedSet::fit_each_C).
//
// With a `log` (resume.h) its units are the (fold, gamma) cells: the cells it holds are
// replayed, not fitted, and when log->stop_now() says stop between cells it returns at once
// with log->stopped set and the finished cells in the log (the returned table is then
// incomplete and must not be used). A cell's record is its confusion matrices, whatever
// `scoring` is, so a log replays into a table of any scoring but log_loss; under log_loss
// each C's log-loss follows its matrix. log->computed_for says which ("log_loss" or ""):
// cells of the other kind are dropped and computed again (UnitLog::compute_for).
ModelSelection cross_validate(const float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                              const std::vector<double>& C, const std::vector<std::string>& gamma, int folds,
                              uint64_t seed, cae::Device device, const CvProgress& progress = {}, int views = 1,
                              UnitLog* log = nullptr, Scoring scoring = Scoring::accuracy);

}  // namespace svm
