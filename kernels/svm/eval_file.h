// The svm-eval file (format "svm-eval", docs/FORMATS.md) and svm-eval's summaries of an
// svm::Evaluation: the HDF5 datasets and attributes, the JSON fields of --json and the
// table printed on stderr.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/hdf5_io.h"
#include "common/json.h"
#include "kernels/svm/evaluate.h"

namespace svm {

// How the evaluation was made, stored beside its numbers.
struct EvalRun {
  std::string split, tta = "none", device;
  double seconds = 0, predict_seconds = 0;
  int64_t n_sv = 0;
  const std::vector<double>* decision_values = nullptr;  // [n, pairs], stored when given
  int pairs = 0;
};

// Datasets /predictions, /labels, /confusion, /probabilities (with a model's sigmoids),
// /decision_values (when run.decision_values), /metrics/{precision,recall,f1,support} [K],
// and the root attributes (accuracy, per_class_accuracy, macro_f1, balanced_accuracy,
// top_k / top_k_accuracy, log_loss, ...). Format and provenance are the caller's.
void write_eval_file(cae::Hdf5Writer& w, const Evaluation& e, const EvalRun& run);

// The fields of svm-eval --json: split, tta, n, correct, accuracy, per_class_accuracy,
// class_names, confusion, per-class precision/recall/f1/support, the macro averages,
// balanced accuracy, top-k, log_loss, n_sv, the seconds and the device.
void add_eval_json(cae::JsonObject& json, const Evaluation& e, const EvalRun& run);

// The per-class table (accuracy, n, precision, recall, F1, the confusion row) and the
// averages below it.
std::string eval_table(const Evaluation& e);

}  // namespace svm
