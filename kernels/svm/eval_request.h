// What svm-eval does, as a library (the tool only turns options into an EvalRequest): load
// the model (an svm-fit or a libsvm model) and --reject's one-class model, read the rows and
// check they fit both, start a group's ranks or take this process's place in one (each
// computes the decision values of its slice of the rows), evaluate on rank 0 and write the
// svm-eval file (docs/FORMATS.md), its log lines and table. The rows come through the
// request's reader because the features formats are the autoencoder layer's
// (kernels/ae/features_reader.h), which this layer may not include.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/group.h"
#include "common/large_buffer.h"
#include "common/view_set.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/evaluate.h"

namespace svm {

// The rows to classify, [views·n, dim] (view j of row i at row i + j·n), labels repeated per
// view: as ae::read_features gives them.
struct EvalRows {
  cae::LargeVector<float> X;
  std::vector<int32_t> labels;
  int64_t n = 0;       // rows per view
  int64_t rows = 0;    // every view's rows
  RowsOrigin origin;   // the file, the rows' name, width, encoder and classes
  bool plain = false;  // a plain HDF5 features file: no encoder hash
};

struct EvalRequest {
  std::string model, libsvm_range, reject;  // reject: "" or a one-class model
  std::string file;                 // --features or --test
  bool separate_test = false;       // the file is --test (the log line names it alone)
  std::string output;               // the svm-eval file (rank 0 writes it, atomically)
  std::string export_data;          // "" or the scaled rows in libsvm's text format
  std::string device = "auto";      // --device: auto, cpu or gpu
  std::string split = "test", tta = "none";
  bool decision_values = false, allow_mismatch = false;
  int threads = 0;
  cae::GroupOptions group;
  // Reads the rows of `file` at `split` (their views `tta`) for the model `clf`.
  std::function<EvalRows(const cae::ViewSet& tta, const Classifier& clf)> read_rows;
};

// svm-eval's --json line on rank 0; "" on the other ranks and on a launcher of a group.
std::string run_evaluation(const EvalRequest& request);

}  // namespace svm
