// What svm-fit does, as a library (the tool only turns options into a FitRequest): check
// the options together (svm::TrainPlan), start a group's ranks or take this process's place
// in one, read the training rows, fit the scaler while the CUDA driver starts, catch
// SIGUSR1/SIGTERM for a fit with folds (svm::FitPreemption, docs/RELIABILITY.md,
// "Preemption"), train (svm::train), and on rank 0 write the model, its libsvm export and the
// provenance. The rows come through the request's reader because the features formats are
// the autoencoder layer's (kernels/ae/features_reader.h), which this layer may not include.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/group.h"
#include "common/half.h"
#include "common/large_buffer.h"
#include "common/view_set.h"

namespace svm {

// The training rows of the images' views, [views·n, dim] (the n originals, then each other
// view's n), labels repeated per view: as ae::read_training_rows gives them.
struct FitRows {
  cae::LargeVector<float> X;       // empty while the rows are kept as halves
  cae::LargeVector<cae::Half> X16;  // float16 rows as stored, when asked to keep them
  std::vector<int32_t> labels;     // [rows]
  int64_t n = 0;                   // images (rows per view)
  int64_t rows = 0;                // every view's rows
  int dim = 0;
  bool float16 = false;            // every row came from a float16 dataset
  std::vector<std::string> class_names;
  std::string encoder_sha256;      // "" when the file names no encoder
};

struct FitRequest {
  std::string features;          // the file the rows come from (hashed, named in messages)
  std::string output;            // the svm-model file (rank 0 writes it, atomically)
  std::string export_libsvm;     // "" or libsvm's text model
  std::string device = "auto";   // --device: auto, cpu or gpu
  std::string kernel = "rbf", C = "10", gamma = "scale", scale = "standard", augment = "none";
  std::string class_weight = "none", kind = "c-svc", cv_scoring = "accuracy";
  std::string approx;            // --approx: "" (the exact SVM) or nystroem:M
  int64_t approx_seed = 1;
  bool approx_seed_given = false;  // the exact SVM refuses --approx-seed (svm::plan_approx)
  double tol = 1e-3, nu = 0.5;
  bool nu_given = false;         // c-svc refuses --nu (svm::plan_kind)
  int64_t cache_mb = 0, train_limit = 0, cv = 0, cv_seed = 1;
  int threads = 0;
  bool probability = false, resume = false;
  cae::GroupOptions group;
  // Reads the rows of `views`, keeping float16 rows as halves when `keep_float16`.
  std::function<FitRows(const cae::ViewSet& views, bool keep_float16)> read_rows;
};

// svm-fit's --json line (svm::report_fit) on rank 0; "" on the other ranks and on a
// launcher of a group. Throws cae::UsageError for options that do not go together.
std::string run_fit(FitRequest request);

}  // namespace svm
