#include "kernels/svm/eval_file.h"

#include <cmath>
#include <utility>

#include "common/escape.h"
#include "common/log.h"

namespace svm {

namespace {

std::vector<double> per_class(const Evaluation& e, double ClassMetrics::*field) {
  std::vector<double> v;
  // A class in neither the labels nor the predictions has no row in sklearn's report.
  for (const ClassMetrics& m : e.report.per_class) v.push_back(m.present ? m.*field : std::nan(""));
  return v;
}

// A class name as a cell of the table, `width` characters wide (left- or right-aligned):
// control characters escaped as in the logs (a newline would split the table, ESC drive the
// terminal), cut after `width` characters, never inside a UTF-8 sequence.
std::string name_cell(const std::string& name, size_t width, bool left) {
  const std::string shown = cae::escape_controls(name);
  size_t bytes = 0, chars = 0;
  while (bytes < shown.size() && chars < width) {
    ++bytes, ++chars;
    while (bytes < shown.size() && (static_cast<unsigned char>(shown[bytes]) & 0xC0) == 0x80) ++bytes;
  }
  const std::string pad(width - chars, ' ');
  return left ? shown.substr(0, bytes) + pad : pad + shown.substr(0, bytes);
}

}  // namespace

void write_eval_file(cae::Hdf5Writer& w, const Evaluation& e, const EvalRun& run) {
  const uint64_t K = static_cast<uint64_t>(e.K);
  w.write("/predictions", e.predictions);
  w.write("/labels", e.labels);
  w.write("/confusion", e.confusion.data(), {K, K});
  if (run.decision_values)
    w.write("/decision_values", run.decision_values->data(),
            {static_cast<uint64_t>(e.n), static_cast<uint64_t>(run.pairs)});
  w.write("/metrics/precision", per_class(e, &ClassMetrics::precision));
  w.write("/metrics/recall", per_class(e, &ClassMetrics::recall));
  w.write("/metrics/f1", per_class(e, &ClassMetrics::f1));
  std::vector<int64_t> support;
  for (const ClassMetrics& m : e.report.per_class) support.push_back(m.support);
  w.write("/metrics/support", support);
  if (e.has_probabilities()) {
    w.write("/probabilities", e.probabilities.data(), {static_cast<uint64_t>(e.n), K});
    w.set_attr("/", "log_loss", e.log_loss);
    std::vector<int64_t> ks;
    std::vector<double> accuracies;
    for (const auto& [k, a] : e.top_k) ks.push_back(k), accuracies.push_back(a);
    w.set_attr("/", "top_k", ks);
    w.set_attr("/", "top_k_accuracy", accuracies);
  }
  const std::pair<const char*, double> numbers[] = {{"accuracy", e.report.accuracy},
                                                     {"macro_precision", e.report.macro_precision},
                                                     {"macro_recall", e.report.macro_recall},
                                                     {"macro_f1", e.report.macro_f1},
                                                     {"weighted_f1", e.report.weighted_f1},
                                                     {"balanced_accuracy", e.report.balanced_accuracy},
                                                     {"seconds", run.seconds},
                                                     {"predict_seconds", run.predict_seconds}};
  for (const auto& [key, value] : numbers) w.set_attr("/", key, value);
  w.set_attr("/", "per_class_accuracy", e.per_class_accuracy);
  w.set_attr("/", "class_names", e.class_names);
  w.set_attr("/", "n_sv", run.n_sv);
  const std::pair<const char*, std::string> texts[] = {{"split", run.split}, {"tta", run.tta}, {"device", run.device}};
  for (const auto& [key, value] : texts) w.set_attr("/", key, value);
}

void add_eval_json(cae::JsonObject& json, const Evaluation& e, const EvalRun& run) {
  std::vector<std::vector<int64_t>> conf(static_cast<size_t>(e.K));
  std::vector<int64_t> support;
  for (int t = 0; t < e.K; ++t) {
    const auto row = e.confusion.begin() + static_cast<ptrdiff_t>(t) * e.K;
    conf[static_cast<size_t>(t)].assign(row, row + e.K);
    support.push_back(e.report.per_class[t].support);
  }
  json.add("split", run.split).add("tta", run.tta).add("n", e.n)
      .add("correct", e.correct)
      .add("accuracy", e.report.accuracy)
      .add("per_class_accuracy", e.per_class_accuracy)
      .add("class_names", e.class_names)
      .add("confusion", conf)
      .add("precision", per_class(e, &ClassMetrics::precision))
      .add("recall", per_class(e, &ClassMetrics::recall))
      .add("f1", per_class(e, &ClassMetrics::f1))
      .add("support", support)
      .add("macro_precision", e.report.macro_precision)
      .add("macro_recall", e.report.macro_recall)
      .add("macro_f1", e.report.macro_f1)
      .add("weighted_f1", e.report.weighted_f1)
      .add("balanced_accuracy", e.report.balanced_accuracy);
  if (e.has_probabilities()) {
    json.add("log_loss", e.log_loss);
    cae::JsonObject top;
    for (const auto& [k, accuracy] : e.top_k) top.add(std::to_string(k), accuracy);
    json.add("top_k_accuracy", top);
  }
  json.add("n_sv", run.n_sv)
      .add("predict_seconds", run.predict_seconds)
      .add("seconds", run.seconds)
      .add("device", run.device);
}

std::string eval_table(const Evaluation& e) {
  const int K = e.K;
  std::string s = "class        accuracy      n  precision recall     F1   predicted as:\n";
  s += "                                                                ";
  for (int c = 0; c < K; ++c) s += " " + name_cell(e.class_names[c], 5, false);
  s += "\n";
  for (int t = 0; t < K; ++t) {
    const ClassMetrics& m = e.report.per_class[t];
    const std::string acc = m.support ? cae::strprintf("%6.2f %%", 100.0 * m.recall) : std::string("     -  ");
    s += name_cell(e.class_names[t], 12, true) + cae::strprintf(" %s %6lld ", acc.c_str(), static_cast<long long>(m.support));
    s += m.present ? cae::strprintf("   %6.4f %6.4f %6.4f   ", m.precision, m.recall, m.f1)
                   : std::string("        -      -      -   ");
    for (int c = 0; c < K; ++c)
      s += cae::strprintf(" %5lld", static_cast<long long>(e.confusion[static_cast<size_t>(t) * K + c]));
    s += "\n";
  }
  s += cae::strprintf("macro avg: precision %.4f, recall %.4f, F1 %.4f; balanced accuracy %.4f\n",
                      e.report.macro_precision, e.report.macro_recall, e.report.macro_f1, e.report.balanced_accuracy);
  for (const auto& [k, a] : e.top_k) s += cae::strprintf("top-%d accuracy %.2f %%\n", k, 100 * a);
  return s;
}

}  // namespace svm
