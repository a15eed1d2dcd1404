// Classification metrics as scikit-learn defines them (classification_report,
// balanced_accuracy_score, f1_score(average="macro"), top_k_accuracy_score, log_loss), so a
// number here equals sklearn's on the same predictions (tests/python/test_metrics.py).
//
// Classes are 0..K-1. As in sklearn, the macro averages run over the classes that occur in
// the labels or the predictions (a class in neither has no row in classification_report);
// a precision with nothing predicted, or a recall with no support, is 0; balanced accuracy
// is the mean recall over the classes that occur in the labels.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace svm {

// [K, K] counts, row = true class, column = predicted class.
std::vector<int64_t> confusion_matrix(const int32_t* labels, const int32_t* predictions, int64_t n, int K);

struct ClassMetrics {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;   // rows of this class in the labels
  bool present = false;  // in the labels or the predictions: a row of sklearn's report
};

struct ClassificationReport {
  std::vector<ClassMetrics> per_class;  // [K]
  double accuracy = 0;
  double macro_precision = 0, macro_recall = 0, macro_f1 = 0;
  double weighted_f1 = 0;  // by support
  double balanced_accuracy = 0;
  int64_t n = 0;
};
// From a confusion matrix; throws std::invalid_argument when it holds no rows.
ClassificationReport classification_report(const std::vector<int64_t>& confusion, int K);

// The fraction of rows whose true class is among the k most probable; ties at the k-th
// place are broken towards the larger class index, as sklearn's reversed stable argsort.
// probabilities: [n, K] row-major.
double top_k_accuracy(const double* probabilities, const int32_t* labels, int64_t n, int K, int k);
// Mean −log p(true class), p clipped to [1e-15, 1 − 1e-15] as sklearn 1.2's log_loss.
double log_loss(const double* probabilities, const int32_t* labels, int64_t n, int K);
// A bound no log_loss exceeds: −log(1e-15) = 34.5388 (a confident mistake on every row), for
// readers that check a stored log-loss.
constexpr double kMaxLogLoss = 34.54;

// What model selection can maximise (svm-fit --cv-scoring): a score where larger is better,
// so log_loss is negated as sklearn's "neg_log_loss".
enum class Scoring { accuracy, balanced_accuracy, macro_f1, log_loss };
Scoring parse_scoring(const std::string& name);  // throws std::invalid_argument naming the choices
const char* scoring_name(Scoring s);
// The score of a [K, K] confusion matrix (as confusion_matrix): every scoring but log_loss,
// which needs probabilities (std::invalid_argument).
double score(Scoring s, const std::vector<int64_t>& confusion, int K);

}  // namespace svm
