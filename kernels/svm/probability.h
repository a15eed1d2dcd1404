// Probability estimates for the one-vs-one SVM: libsvm's `-b 1` (docs/SVM.md, "Probabilities").
//
//   fit:      for each class pair (a, b), a Platt sigmoid P(a | a or b, f) = 1 / (1 + exp(A f + B))
//             of the pair's decision value f, fitted on cross-validated decision values —
//             each row's from a model that did not see it — with the Newton method of Lin, Lin
//             & Weng (2007) (libsvm's sigmoid_train, line for line);
//   predict:  each pair's sigmoid (sigmoid_predict, clipped to [1e-7, 1 − 1e-7]), then the
//             pairwise coupling of Wu, Lin & Weng (2004), method 2 (libsvm's
//             multiclass_probability: same iteration, stopping rule and iteration limit).
//
// The numbers here are libsvm's; only the folds of the cross-validation are drawn our way
// (fit_sigmoids).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/device.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/resume.h"

namespace svm {

// libsvm's sigmoid_train: A, B minimising the cross-entropy of the smoothed targets
// (prior1 + 1) / (prior1 + 2) for label > 0 and 1 / (prior0 + 2) otherwise, starting at
// A = 0, B = log((prior0 + 1) / (prior1 + 1)); Newton with H + 1e-12 I, backtracking line
// search (sufficient decrease 1e-4, step ≥ 1e-10), stop at |gradient| < 1e-5 or 100
// iterations. labels: +1 / −1 (any positive / non-positive value).
void sigmoid_train(int64_t n, const double* dec, const double* labels, double& A, double& B);

// libsvm's sigmoid_predict: 1 / (1 + exp(A f + B)), computed without cancellation.
double sigmoid_predict(double dec, double A, double B);

// libsvm's multiclass_probability: class probabilities p[k] (summing to 1) from the pairwise
// ones r[k, k] row-major (r[i, j] = P(i | i or j), r[j, i] = 1 − r[i, j]; the diagonal is
// not read).
void multiclass_probability(int k, const double* r, double* p);

// Class probabilities [n, k] (model class order) from decision values [n, k(k−1)/2] and
// the pairs' A, B — svm_predict_probability's arithmetic (two classes: the pair's sigmoid
// itself, as libsvm 3.24 does).
std::vector<double> probabilities_from_decisions(const std::vector<double>& dec, int64_t n, int k,
                                                 const std::vector<double>& A, const std::vector<double>& B);

// fit_sigmoids' requirement, for a caller that wants to refuse early: every class of the
// `images` labels has at least 2 images (each fold's training rows then hold every class).
// Throws std::runtime_error("<data_name>: class C has 1 training image; ...").
void check_sigmoid_data(const int32_t* y, int64_t images, const std::string& data_name);

// After every fold of the cross-validation: folds done of the total.
using SigmoidProgress = std::function<void(int folds_done, int folds_total)>;

// The fit: cross-validated decision values by `folds` stratified, seeded folds (grouped_folds
// of model_selection.h, so with views > 1 an image and its mirror share a fold), each fold a
// whole Classifier::fit of `params` on the other folds' rows predicting the held-out images'
// first view; then sigmoid_train per pair on the rows of its two classes (class a's rows
// then class b's, in row order, as libsvm orders a pair's problem). X [n, dim] is read, not
// changed (each fold gets a copy). Returns A and B, [k(k−1)/2] each, in pair order.
// Throws std::runtime_error("<params.data_name>: ...") when a class has fewer than 2 images
// (a fold's training rows would miss it).
// With a `log` (resume.h) its units are the folds, as cross_validate's are its cells: the
// folds it holds are replayed, and on a stop it returns empty sigmoids with log->stopped set.
struct Sigmoids {
  std::vector<double> A, B;
  int folds = 0;
  uint64_t seed = 0;
  double seconds = 0;
};
Sigmoids fit_sigmoids(const float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                      int folds, uint64_t seed, cae::Device device, int views = 1,
                      const SigmoidProgress& progress = {}, UnitLog* log = nullptr);

// The folds libsvm's -b 1 draws for its sigmoids (svm-fit --probability, and the probability
// model of every cell of --cv-scoring log_loss).
constexpr int kLibsvmProbabilityFolds = 5;

// fit_sigmoids for every C of `Cs` (params.C ignored), in this process alone (params.group
// ignored), without units or progress: each fold's rows are scaled and masked once and every
// C solves on them (PreparedSet::fit_each_C: on the GPU one kernel matrix per fold serves
// every C). The n rows are X's rows x_rows[0..n) (FoldSplit's picked rows; null: X's first
// n), with labels y[0..n): cross_validate passes an outer fold's training part as row numbers
// into its own X, so the fold's rows are not held a second time. Element c equals
// fit_sigmoids on those rows gathered, with C = Cs[c] (seconds: the whole call's).
std::vector<Sigmoids> fit_sigmoids_each_C(const float* X, const int64_t* x_rows, const int32_t* y, int64_t n,
                                          int dim, const ClassifierParams& params, const std::vector<double>& Cs,
                                          int folds, uint64_t seed, cae::Device device, int views = 1);

}  // namespace svm
