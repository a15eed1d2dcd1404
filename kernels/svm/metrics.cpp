#include "kernels/svm/metrics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace svm {

std::vector<int64_t> confusion_matrix(const int32_t* labels, const int32_t* predictions, int64_t n, int K) {
  std::vector<int64_t> confusion(static_cast<size_t>(K) * K, 0);
  for (int64_t r = 0; r < n; ++r) {
    if (labels[r] < 0 || labels[r] >= K || predictions[r] < 0 || predictions[r] >= K)
      throw std::invalid_argument("confusion_matrix: row " + std::to_string(r) + " has a class outside 0.." +
                                  std::to_string(K - 1));
    ++confusion[static_cast<size_t>(labels[r]) * K + predictions[r]];
  }
  return confusion;
}

ClassificationReport classification_report(const std::vector<int64_t>& confusion, int K) {
  if (K < 1 || confusion.size() != static_cast<size_t>(K) * K)
    throw std::invalid_argument("classification_report: the confusion matrix is not K x K");
  ClassificationReport r;
  r.per_class.resize(static_cast<size_t>(K));
  int64_t correct = 0;
  std::vector<int64_t> predicted(static_cast<size_t>(K), 0);
  for (int t = 0; t < K; ++t)
    for (int p = 0; p < K; ++p) {
      const int64_t c = confusion[static_cast<size_t>(t) * K + p];
      r.per_class[t].support += c;
      predicted[p] += c;
      r.n += c;
      if (t == p) correct += c;
    }
  if (r.n == 0) throw std::invalid_argument("classification_report: no rows");
  int present = 0, supported = 0;
  double recall_sum = 0;
  for (int c = 0; c < K; ++c) {
    ClassMetrics& m = r.per_class[c];
    const double tp = static_cast<double>(confusion[static_cast<size_t>(c) * K + c]);
    m.present = m.support > 0 || predicted[c] > 0;
    m.precision = predicted[c] ? tp / static_cast<double>(predicted[c]) : 0.0;
    m.recall = m.support ? tp / static_cast<double>(m.support) : 0.0;
    // sklearn: 2·tp / (2·tp + fp + fn), 0 where that is 0/0.
    const double denominator = 2 * tp + static_cast<double>(predicted[c]) - tp + static_cast<double>(m.support) - tp;
    m.f1 = denominator > 0 ? 2 * tp / denominator : 0.0;
    if (m.present) {
      ++present;
      r.macro_precision += m.precision;
      r.macro_recall += m.recall;
      r.macro_f1 += m.f1;
    }
    if (m.support > 0) {
      ++supported;
      recall_sum += m.recall;
      r.weighted_f1 += m.f1 * static_cast<double>(m.support);
    }
  }
  r.accuracy = static_cast<double>(correct) / static_cast<double>(r.n);
  r.macro_precision /= present;
  r.macro_recall /= present;
  r.macro_f1 /= present;
  r.weighted_f1 /= static_cast<double>(r.n);
  r.balanced_accuracy = recall_sum / supported;
  return r;
}

double top_k_accuracy(const double* probabilities, const int32_t* labels, int64_t n, int K, int k) {
  if (n <= 0) throw std::invalid_argument("top_k_accuracy: no rows");
  int64_t hits = 0;
  for (int64_t r = 0; r < n; ++r) {
    const double* p = probabilities + r * K;
    const int t = labels[r];
    int ahead = 0;  // classes ranked before the true one
    for (int c = 0; c < K; ++c) ahead += p[c] > p[t] || (p[c] == p[t] && c > t);
    hits += ahead < k;
  }
  return static_cast<double>(hits) / static_cast<double>(n);
}

double log_loss(const double* probabilities, const int32_t* labels, int64_t n, int K) {
  if (n <= 0) throw std::invalid_argument("log_loss: no rows");
  double sum = 0;
  // A confident mistake costs −log(1e-15) = 34.5, not infinity.
  for (int64_t r = 0; r < n; ++r) sum -= std::log(std::clamp(probabilities[r * K + labels[r]], 1e-15, 1 - 1e-15));
  return sum / static_cast<double>(n);
}

namespace {
const std::pair<Scoring, const char*> kScorings[] = {{Scoring::accuracy, "accuracy"},
                                                    {Scoring::balanced_accuracy, "balanced_accuracy"},
                                                    {Scoring::macro_f1, "macro_f1"},
                                                    {Scoring::log_loss, "log_loss"}};
}

Scoring parse_scoring(const std::string& name) {
  for (const auto& s : kScorings)
    if (name == s.second) return s.first;
  throw std::invalid_argument("unknown scoring '" + name + "' (accuracy, balanced_accuracy, macro_f1, log_loss)");
}

const char* scoring_name(Scoring s) {
  for (const auto& e : kScorings)
    if (s == e.first) return e.second;
  return "?";
}

double score(Scoring s, const std::vector<int64_t>& confusion, int K) {
  if (s == Scoring::log_loss) throw std::invalid_argument("scoring log_loss needs probabilities, not a confusion matrix");
  const ClassificationReport r = classification_report(confusion, K);
  return s == Scoring::accuracy ? r.accuracy : s == Scoring::balanced_accuracy ? r.balanced_accuracy : r.macro_f1;
}

}  // namespace svm
