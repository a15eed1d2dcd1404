// svm::evaluate — what svm-eval computes from a model's decision values: predictions (the
// one-vs-one vote), probabilities where the model has sigmoids, the confusion matrix and
// every metric of metrics.h. eval_file.h writes, prints and summarises the result.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/hdf5_io.h"
#include "common/json.h"
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
// inside / outside, which neither a confusion matrix nor a class ranking can use; the line
// points at --reject, where svm-eval and classify take one.
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

// Where rows to classify came from (a features file), for the checks below.
struct RowsOrigin {
  std::string file;
  std::string what;  // the rows in messages ("/test/features")
  int dim = 0;
  std::string encoder_sha256;            // "" when the file names no encoder
  std::vector<std::string> class_names;  // the file's classes
};

// Whether `model` (read from model_path) may classify these rows: the same feature width,
// and the same encoder when both the model and the file record one (features of another
// encoder of the same width would be classified without complaint, and wrongly) unless
// allow_mismatch; every class of the model is a class of the file. Throws "<file>: ..." /
// "<model_path>: ..." naming the problem.
void check_rows_fit_model(const Classifier& model, const std::string& model_path, const RowsOrigin& rows,
                          bool allow_mismatch);

// One-class rejection (svm-eval --reject, classify --reject): a one-class model fitted on the
// training features marks each row inside or outside their support.
// load_one_class: an svm-fit --kind one-class model file; anything else is refused naming it.
// check_reject_model: it fits the rows (check_rows_fit_model), and it was fitted on features
// of the same encoder as `clf` when both record one (unless allow_mismatch).
Classifier load_one_class(const std::string& path);
void check_reject_model(const Classifier& one_class, const std::string& path, const Classifier& clf,
                        const std::string& clf_path, const RowsOrigin& rows, bool allow_mismatch);

struct Rejection {
  std::string model;          // the one-class model's file
  std::vector<uint8_t> inside;  // [n] 1 inside the support, 0 outside
  int64_t outside = 0;
  double outside_fraction() const { return inside.empty() ? 0.0 : double(outside) / double(inside.size()); }
};
// X: [views·n, D] unscaled rows, view j of row i at i + j·n (as average_views; read only —
// copied one prediction block of one view at a time, since the model scales its input in
// place; the copy is at most 4,096 rows, never the whole input). A row is inside where the views'
// averaged one-class decision value is > 0: with one view, exactly libsvm's svm-predict on
// the exported model (+1).
Rejection reject_outside(const Classifier& one_class, const std::string& model_path, const float* X, int64_t n,
                         int views, cae::Device device);
// svm-eval's record of it: dataset /inside [n] uint8 and root attributes reject_model,
// n_outside, outside_fraction, accuracy_inside (of the rows inside; NaN when none is); the
// same numbers in --json.
void write_rejection(cae::Hdf5Writer& w, const Rejection& r, const Evaluation& e);
void add_rejection_json(cae::JsonObject& json, const Rejection& r, const Evaluation& e);
double accuracy_inside(const Rejection& r, const Evaluation& e);
// What svm-eval's log line adds: ", K outside (F %; accuracy inside A %)".
std::string rejection_summary(const Rejection& r, const Evaluation& e);

// What classify prints for one row (an image, or a row of a features file): "NAME: CLASS
// (CLASS SCORE, ...)" — the scores are probabilities ("0.731") or votes ("9 votes"); a row a
// one-class model rejects reads "NAME: outside (CLASS)  (...)", the vote kept in parentheses.
// classify --json: {"file" (an image) or "row" (its index in a features file), "label",
// "class", "scores": [{"class", "label", "probability"|"votes"}], and "inside" with --reject}.
// NAME is the file, or the row index.
struct RowVerdict {
  std::string file;                 // the image, or "" for row `row` of a features file
  int64_t row = 0;
  int label = 0;                    // the vote
  std::vector<ClassScore> ranked;   // best first, as many as are listed
  int inside = -1;                  // 1 / 0 with a one-class model, -1 without
};
std::string verdict_text(const RowVerdict& v, const std::vector<std::string>& class_names, bool by_probability);
std::string verdict_json(const RowVerdict& v, const std::vector<std::string>& class_names, bool by_probability);

}  // namespace svm
