// What classify does once it has its rows, as a library (the tool turns options into a
// ClassifyRequest and makes the rows: the images' latent codes, or a features file's rows):
// load the SVM (refusing a one-class model), have the rows made, mark those outside
// --reject's one-class model, vote (each row's decision values averaged over its --tta
// views, as svm-eval's), and print one line (or JSON line) per row and the closing log line.
// The rows come through the request's callback because the encoder and the features formats
// are the autoencoder layer's (kernels/ae), which this layer may not include.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/device.h"
#include "common/large_buffer.h"
#include "common/view_set.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/evaluate.h"

namespace svm {

// The features to classify, [views·n, D]: view j of row i at row i + j·n (cae::ViewSet::views()
// order, as ae-encode writes the views and average_views reads them).
struct ClassifyRows {
  cae::LargeVector<float> X;
  int64_t n = 0;
  RowsOrigin origin;  // what the reject model is checked against
  std::string described, device;  // for the closing log line: what, and the encoder's device
};

struct ClassifyRequest {
  std::string svm;                  // the svm-model file
  std::string reject;               // "" or a one-class model
  std::vector<std::string> images;  // the rows' names (their index where empty: --features)
  cae::CommonOptions common;        // --device, and --json: a JSON line per row
  std::string tta = "none";
  int top = 3;                      // classes listed per row
  bool allow_mismatch = false;
  // Makes the rows, with the SVM they are for, on `device`, with their views `tta`.
  std::function<ClassifyRows(const Classifier& clf, cae::Device device, const cae::ViewSet& tta)> make_rows;
};

void run_classify(const ClassifyRequest& request);

}  // namespace svm
