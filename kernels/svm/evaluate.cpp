#include "kernels/svm/evaluate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/error.h"
#include "common/escape.h"
#include "common/log.h"
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
    cae::fail_file(model_path,
                   "is a one-class model (svm-fit --kind one-class), not a classifier; give it to --reject");
}

Classifier load_classifier(const std::string& model_path, const std::string& range_path, int dim) {
  if (!cae::is_libsvm_text(model_path)) {
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

void check_rows_fit_model(const Classifier& model, const std::string& model_path, const RowsOrigin& rows,
                          bool allow_mismatch) {
  if (rows.dim != model.n_features())
    cae::fail_file(rows.file, rows.what + " has " + std::to_string(rows.dim) + " features per row, but " + model_path +
                                  " was trained on " + std::to_string(model.n_features()));
  const std::string& trained_on = model.file().encoder_sha256;
  const std::string& encoded_by = rows.encoder_sha256;
  if (!trained_on.empty() && !encoded_by.empty() && trained_on != encoded_by && !allow_mismatch)
    cae::fail_file(rows.file, "was encoded by another model (sha256 " + encoded_by.substr(0, 12) + "…) than the one " +
                                  model_path + " was trained on (" + trained_on.substr(0, 12) +
                                  "…); encode with that model, or pass --allow-mismatch");
  for (int c : model.model().classes)
    if (c < 0 || c >= static_cast<int>(rows.class_names.size()))
      cae::fail_file(model_path, "class " + std::to_string(c) + " is not one of the " +
                                     std::to_string(rows.class_names.size()) + " classes of " + rows.file);
}

Classifier load_one_class(const std::string& path) {
  if (cae::is_libsvm_text(path))
    cae::fail_file(path, "is not an svm-model file: --reject takes a one-class model of svm-fit --kind one-class");
  Classifier one_class = Classifier::load(path);
  if (one_class.model().kind != SvmKind::one_class)
    cae::fail_file(path, "is a classifier, not a one-class model: --reject takes one of svm-fit --kind one-class");
  return one_class;
}

void check_reject_model(const Classifier& one_class, const std::string& path, const Classifier& clf,
                        const std::string& clf_path, const RowsOrigin& rows, bool allow_mismatch) {
  check_rows_fit_model(one_class, path, rows, allow_mismatch);
  const std::string& ours = one_class.file().encoder_sha256;
  const std::string& theirs = clf.file().encoder_sha256;
  if (!ours.empty() && !theirs.empty() && ours != theirs && !allow_mismatch)
    cae::fail_file(path, "was fitted on features of another encoder (sha256 " + ours.substr(0, 12) + "…) than " +
                             clf_path + " (" + theirs.substr(0, 12) + "…); fit both on the same features, or pass "
                             "--allow-mismatch");
}

Rejection reject_outside(const Classifier& one_class, const std::string& model_path, const float* X, int64_t n,
                         int views, cae::Device device) {
  // The model scales its input in place, so rows are copied — one view of one block of
  // rows at a time, not the whole input: the blocks are the CPU's own prediction blocks
  // (decision_block_rows), so one view's values are the bits of one call over all rows.
  const int64_t D = one_class.n_features(), block = decision_block_rows(one_class.model());
  std::vector<float> scratch(static_cast<size_t>(std::min(n, block) * D));
  std::vector<double> mean;  // [n], the views' average decision value
  mean.reserve(static_cast<size_t>(n));
  for (int64_t first = 0; first < n; first += block) {
    const int64_t rows = std::min(block, n - first);
    std::vector<double> dec;  // [views·rows], view-major as average_views takes them
    for (int v = 0; v < views; ++v) {
      const float* view_rows = X + (static_cast<size_t>(v) * static_cast<size_t>(n) + static_cast<size_t>(first)) * D;
      std::copy(view_rows, view_rows + rows * D, scratch.begin());
      const std::vector<double> d = one_class.decision_values(scratch.data(), rows, device);
      dec.insert(dec.end(), d.begin(), d.end());
    }
    const std::vector<double> avg = average_views(dec, rows, 1, views);
    mean.insert(mean.end(), avg.begin(), avg.end());
  }
  const std::vector<int32_t> labels = one_class.vote(mean, n);
  Rejection r;
  r.model = model_path;
  r.inside.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    r.inside[i] = labels[i] > 0;
    r.outside += labels[i] > 0 ? 0 : 1;
  }
  return r;
}

double accuracy_inside(const Rejection& r, const Evaluation& e) {
  int64_t inside = 0, correct = 0;
  for (int64_t i = 0; i < e.n && i < static_cast<int64_t>(r.inside.size()); ++i)
    if (r.inside[i]) {
      ++inside;
      correct += e.predictions[i] == e.labels[i];
    }
  return inside ? double(correct) / double(inside) : std::nan("");
}

void write_rejection(cae::Hdf5Writer& w, const Rejection& r, const Evaluation& e) {
  w.write("/inside", r.inside);
  w.set_attr("/", "reject_model", r.model);
  w.set_attr("/", "n_outside", r.outside);
  w.set_attr("/", "outside_fraction", r.outside_fraction());
  w.set_attr("/", "accuracy_inside", accuracy_inside(r, e));
}

void add_rejection_json(cae::JsonObject& json, const Rejection& r, const Evaluation& e) {
  json.add("reject_model", r.model)
      .add("n_outside", r.outside)
      .add("outside_fraction", r.outside_fraction())
      .add("accuracy_inside", accuracy_inside(r, e));
}

std::string rejection_summary(const Rejection& r, const Evaluation& e) {
  return cae::strprintf(", %lld outside (%.2f %%; accuracy inside %.2f %%)", static_cast<long long>(r.outside),
                        100 * r.outside_fraction(), 100 * accuracy_inside(r, e));
}

namespace {
std::string class_name(const std::vector<std::string>& names, int label) {
  return label >= 0 && size_t(label) < names.size() ? names[size_t(label)] : std::to_string(label);
}
}  // namespace

std::string verdict_text(const RowVerdict& v, const std::vector<std::string>& class_names, bool by_probability) {
  const std::string voted = class_name(class_names, v.label);
  std::string line = (v.file.empty() ? std::to_string(v.row) : v.file) + ": " +
                     (v.inside == 0 ? "outside (" + voted + ")" : voted) + "  (";
  for (size_t j = 0; j < v.ranked.size(); ++j)
    line += (j ? ", " : "") + class_name(class_names, v.ranked[j].label) + " " +
            (by_probability ? cae::strprintf("%.3f", v.ranked[j].value)
                            : cae::strprintf("%.0f votes", v.ranked[j].value));
  return cae::escape_controls(line + ")");  // file and class names come from outside
}

std::string verdict_json(const RowVerdict& v, const std::vector<std::string>& class_names, bool by_probability) {
  std::vector<cae::JsonObject> scores;
  for (const ClassScore& score : v.ranked)
    scores.push_back(cae::JsonObject()
                         .add("class", class_name(class_names, score.label))
                         .add("label", score.label)
                         .add(by_probability ? "probability" : "votes", score.value));
  cae::JsonObject json;
  if (v.file.empty()) json.add("row", v.row);
  else json.add("file", v.file);
  json.add("label", v.label).add("class", class_name(class_names, v.label)).add("scores", scores);
  if (v.inside >= 0) json.add("inside", v.inside == 1);
  return json.str();
}

}  // namespace svm
