#include "kernels/svm/evaluate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/error.h"
#include "kernels/svm/libsvm_format.h"

namespace svm {

namespace {
// A one-class model's predictions are inside / outside, not classes: neither a confusion
// matrix nor a ranking of classes means anything for it.
void require_classes(const Classifier& clf, const char* what) {
  if (clf.model().kind == SvmKind::one_class)
    throw std::invalid_argument(std::string(what) + " needs a classifier; the model is one-class (svm-fit --kind one-class)");
}
}  // namespace

void require_classifier(const Classifier& clf, const std::string& model_path) {
  if (clf.model().kind == SvmKind::one_class)
    cae::fail_file(model_path, "is a one-class model (svm-fit --kind one-class), not a classifier");
}

Classifier load_classifier(const std::string& model_path, const std::string& range_path, int dim) {
  if (!is_libsvm_text(model_path)) {
    if (!range_path.empty())
      throw cae::UsageError("--libsvm-range scales the input of a libsvm model; " + model_path +
                            " is an svm-fit model, which keeps its own scaler");
    Classifier clf = Classifier::load(model_path);
    require_classifier(clf, model_path);
    return clf;
  }
  if (range_path.empty()) return Classifier(import_libsvm_model(model_path, nullptr, dim));
  const LibsvmRange range = read_libsvm_range(range_path);
  return Classifier(import_libsvm_model(model_path, &range, dim));
}

Evaluation evaluate(const Classifier& clf, const std::vector<double>& decision_values, std::vector<int32_t> labels,
                    std::vector<std::string> class_names) {
  require_classes(clf, "evaluating predictions against labels");
  const Model& m = clf.model();
  Evaluation e;
  e.n = static_cast<int64_t>(labels.size());
  e.K = static_cast<int>(class_names.size());
  e.class_names = std::move(class_names);
  e.labels = std::move(labels);
  const int K = e.K;
  for (int c : m.classes)
    if (c < 0 || c >= K)
      throw std::invalid_argument("class " + std::to_string(c) + " of the model is not one of the " +
                                  std::to_string(K) + " classes of the data");
  e.predictions = clf.vote(decision_values, e.n);
  e.confusion = confusion_matrix(e.labels.data(), e.predictions.data(), e.n, K);
  e.report = classification_report(e.confusion, K);
  for (int t = 0; t < K; ++t) {
    const int64_t support = e.report.per_class[t].support;
    e.per_class_accuracy.push_back(support ? e.report.per_class[t].recall : std::nan(""));
    e.correct += e.confusion[static_cast<size_t>(t) * K + t];
  }
  e.log_loss = std::nan("");
  if (clf.has_probability()) {
    // Probabilities from the decision values voted on (with test-time augmentation, the
    // averages), a column per class of the data so that column c is class c as in the
    // confusion matrix.
    const std::vector<double> pk = clf.probabilities(decision_values, e.n);
    const size_t km = m.classes.size();
    e.probabilities.assign(static_cast<size_t>(e.n) * K, 0.0);
    for (int64_t r = 0; r < e.n; ++r)
      for (size_t c = 0; c < km; ++c) e.probabilities[static_cast<size_t>(r) * K + m.classes[c]] = pk[r * km + c];
    e.log_loss = log_loss(e.probabilities.data(), e.labels.data(), e.n, K);
    for (int k : {2, 5})
      if (k < K) e.top_k.emplace_back(k, top_k_accuracy(e.probabilities.data(), e.labels.data(), e.n, K, k));
  }
  return e;
}

std::vector<std::vector<ClassScore>> ranked_classes(const Classifier& clf, const std::vector<double>& decision_values,
                                                    int64_t n) {
  require_classes(clf, "ranking classes");
  const std::vector<int>& classes = clf.model().classes;
  const int k = static_cast<int>(classes.size());
  std::vector<std::vector<ClassScore>> out(static_cast<size_t>(n));
  const std::vector<double> prob =
      clf.has_probability() ? clf.probabilities(decision_values, n) : std::vector<double>();
  const int pairs = clf.model().n_pairs();
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> score(static_cast<size_t>(k), 0.0);
    if (!prob.empty()) {
      std::copy(prob.begin() + r * k, prob.begin() + (r + 1) * k, score.begin());
    } else {
      const double* dec = decision_values.data() + r * pairs;
      int p = 0;
      for (int a = 0; a < k; ++a)
        for (int b = a + 1; b < k; ++b, ++p) score[dec[p] > 0 ? a : b] += 1;
    }
    for (int c = 0; c < k; ++c) out[r].push_back({classes[c], score[c]});
    std::stable_sort(out[r].begin(), out[r].end(),
                     [](const ClassScore& x, const ClassScore& y) { return x.value > y.value; });
  }
  return out;
}

}  // namespace svm
