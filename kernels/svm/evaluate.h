// svm::evaluate — what svm-eval computes from a model's decision values: predictions (the
// one-vs-one vote), probabilities where the model has sigmoids, the confusion matrix and
// every metric of metrics.h. eval_file.h writes, prints and summarises the result.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/svm/classifier.h"
#include "kernels/svm/metrics.h"

namespace svm {

struct Evaluation {
  int64_t n = 0;
  int K = 0;                          // classes of the evaluated data (class_names)
  std::vector<std::string> class_names;
  std::vector<int32_t> labels;        // [n]
  std::vector<int32_t> predictions;   // [n]
  std::vector<double> probabilities;  // [n, K] (column c = class c; 0 for a class the model never saw), or empty
  std::vector<int64_t> confusion;     // [K, K]
  std::vector<double> per_class_accuracy;  // [K] recall, NaN for a class with no rows
  ClassificationReport report;
  int64_t correct = 0;
  double log_loss = 0;                          // NaN without probabilities
  std::vector<std::pair<int, double>> top_k;    // (k, top-k accuracy) for k = 2, 5 below K, with probabilities
  bool has_probabilities() const { return !probabilities.empty(); }
};

// The model svm-eval classifies with: an svm-fit model file, or a model trained by libsvm's
// svm-train (libsvm_format.h: import_libsvm_model), read over at least `dim` features, with
// svm-scale's range file `range_path` as its scaler ("" for none; only for libsvm models,
// cae::UsageError otherwise).
// A one-class model (svm-fit --kind one-class) is refused, naming the file: its answers are
// inside / outside, which neither a confusion matrix nor a class ranking can use.
Classifier load_classifier(const std::string& model_path, const std::string& range_path = "", int dim = 0);
// The same refusal for a model loaded otherwise (classify).
void require_classifier(const Classifier& clf, const std::string& model_path);

// decision_values: [n, pairs] of clf's model (for test-time augmentation, the views'
// averages); labels: [n] class indices of `class_names`, which must include every class of
// the model (std::invalid_argument otherwise).
Evaluation evaluate(const Classifier& clf, const std::vector<double>& decision_values, std::vector<int32_t> labels,
                    std::vector<std::string> class_names);

// Every class of the model for each of the n rows, best first: by probability where the
// model has sigmoids (svm-fit --probability), else by one-vs-one votes (ties keep class
// order, so the first is what vote() returns). What classify prints for images, and for the
// rows of a features file (classify --features).
struct ClassScore {
  int label;     // class index (model().classes)
  double value;  // probability, or votes
};
std::vector<std::vector<ClassScore>> ranked_classes(const Classifier& clf, const std::vector<double>& decision_values,
                                                    int64_t n);

}  // namespace svm
