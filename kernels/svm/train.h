// svm::train — svm-fit's work on training rows in memory, as one library call: the (C, gamma)
// search by cross-validation when asked (model_selection.h), libsvm's probability sigmoids
// when asked (probability.h), then the model of the chosen pair on all rows, with the table
// and the sigmoids recorded in it. The order matters: both cross-validations read the
// unscaled rows, so they run before the final fit scales them in place.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/progress.h"
#include "common/view_set.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/probability.h"

namespace svm {

struct TrainPlan {
  // The model's settings (kernel, tol, class weights, scaling, group, ...). Its C and gamma
  // are replaced by the lists' pick.
  ClassifierParams params;
  // With cv_folds >= 2 every (C, gamma) pair is cross-validated and the best becomes the
  // model; without, each list must hold one value.
  std::vector<double> C{10.0};
  std::vector<std::string> gamma{"scale"};
  int cv_folds = 0;
  // What picks the pair among the cross-validated ones (cross_validate).
  Scoring cv_scoring = Scoring::accuracy;
  int probability_folds = 0;  // 0: no probabilities; libsvm's -b 1 draws 5
  uint64_t seed = 1;          // the folds' shuffle, for the search and the sigmoids
  // The views of each image in the rows (svm-fit --augment): views.count() blocks of the
  // images, as grouped_folds takes them.
  cae::ViewSet views;
  // Preemption (resume.h): the cross-validations' finished units, replayed, and when to stop
  // between units; nullptr: run through.
  TrainUnits* units = nullptr;
};

// The plan of svm-fit's options: the C and gamma lists (comma-separated), the kernel
// ("rbf" or "linear"), the folds (0: none) and the KKT tolerance, checked together
// (UsageError: a list without --cv, gamma with a linear kernel, tol <= 0, one fold).
TrainPlan plan_from_options(const std::string& C, const std::string& gamma, const std::string& kernel, int64_t cv,
                            double tol);

// svm-fit --kind and --nu (nullopt: not given, 0.5 for one-class; a NaN given is refused
// like any nu outside the range) into the plan: "c-svc" leaves it as it is and refuses a
// given nu; "one-class" sets the kind and nu and refuses, with a UsageError, what the
// one-class fit does not have: nu outside (0, 1], cross-validation, probabilities, class
// weights ("none" is none) and a C list.
void plan_kind(TrainPlan& plan, const std::string& kind, std::optional<double> nu, const std::string& class_weight);

// svm-fit --approx and --approx-seed (nullopt: not given; 1) into the plan: "" leaves the
// exact SVM and refuses a given seed; "nystroem:M" (parse_approx_spec) sets plan.params.approx
// and refuses, with a cae::UsageError, what the Nyström fit does not do: --kind one-class
// (call after plan_kind) and --kernel linear.
void plan_approx(TrainPlan& plan, const std::string& approx, std::optional<uint64_t> seed);

// Each may be empty.
struct TrainProgress {
  CvProgress cv;                                        // after every fit of the search
  std::function<void(const ModelSelection&)> selected;  // the finished table, before the refit
  SigmoidProgress probability;                          // after every probability fold
  FitProgress fit;                                      // the final fit's
};

struct Trained {
  Classifier classifier;  // its model selection and sigmoids set (on a group: rank 0's alone)
  double probability_seconds = 0;
  // Stopped between units at plan.units' request (its logs hold the finished ones): no
  // classifier was fitted.
  bool interrupted = false;
};

// X [n, dim]: scratch, as for Classifier::fit; y: n labels. `prepared`, when given: a
// PreparedSet of plan.params on X (X scaled and masked by it, or, for a GPU fit, its rows
// prepared on the GPU), which a plan without cross-validation or sigmoids may bring (svm-fit
// fits the scaler while the GPU starts up). std::invalid_argument
// when the lists and cv_folds disagree, or `prepared` comes with folds; otherwise what
// Classifier::fit, cross_validate and fit_sigmoids throw.
Trained train(float* X, const int32_t* y, int64_t n, int dim, const TrainPlan& plan, cae::Device device,
              const TrainProgress& progress = {}, const PreparedSet* prepared = nullptr);

// The training labels before any work: fails naming `data_name` when they hold fewer than two
// classes; warns naming the classes of class_names that they lack (the model can never
// predict those).
void check_training_classes(const int32_t* y, int64_t n, const std::vector<std::string>& class_names,
                            const std::string& data_name);

// Every check of the training images' labels (y: the n images', the first view) that the
// plan needs before any work: check_training_classes for c-svc, check_cv_folds with
// cross-validation, check_sigmoid_data with probabilities.
void check_training_labels(const TrainPlan& plan, const int32_t* y, int64_t n,
                           const std::vector<std::string>& class_names, const std::string& data_name);

// svm-fit --class-weight. "none": no weights. "balanced": w_c = n / (k · n_c) over the n
// labels, k of them distinct (scikit-learn's class_weight='balanced'). "NAME:W,NAME:W,...":
// NAME a class name of class_names or a label number, W a finite number > 0; classes not
// named weigh 1. cae::UsageError on anything else, and for a NAME that is neither a class
// name nor the label of one of class_names (naming the classes): a weight on no class.
ClassWeights resolve_class_weights(const std::string& spec, const int32_t* y, int64_t n,
                                   const std::vector<std::string>& class_names);

// svm-fit's --cache-mb when not given: half of the memory this process may use
// (`usable_bytes`: cae::usable_memory_bytes) once the training rows (`rows_bytes`) are
// held, shared by the `ranks` of a group (which may share one node), at least 64 MB. A
// kernel matrix is allocated for what a pair needs, never for the budget, so a large
// budget costs nothing where the pairs are small; where they are large it keeps them dense
// (the row-cache fallback is many times slower) and the classes' diagonal blocks cached.
int64_t default_cache_mb(uint64_t usable_bytes, uint64_t rows_bytes, int ranks);

// The log lines of a finished search: every pair's accuracy (and score, when the scoring is
// not the accuracy), then the best one (`rows`: how many rows the refit sees).
void log_model_selection(const ModelSelection& s, int64_t rows);

// svm-fit's account of a train() call: the log lines of its steps (search, table,
// probabilities, the final fit's settings) and a progress bar for each (drawn on a terminal
// only). `images`: the first of plan.views blocks of labels in y; `world`: the ranks of the
// group (the bar counts rank 0's pairs).
class TrainReporter {
 public:
  TrainReporter(const TrainPlan& plan, const int32_t* y, int64_t images, int dim, int world, cae::Device device);
  TrainReporter(const TrainReporter&) = delete;  // progress() points into this object
  TrainReporter& operator=(const TrainReporter&) = delete;
  const TrainProgress& progress() const { return progress_; }
  void finish();  // after train(), finished or interrupted: no bar is left on the terminal

 private:
  TrainProgress progress_;
  std::unique_ptr<cae::ProgressBar> fit_bar_, cv_bar_, probability_bar_;
  uint64_t seed_;
};

// What svm-fit says when the model is written: the log line, and the --json summary it
// returns (the model's numbers, its search's, and these).
struct FitSummary {
  std::string output, augment;
  int64_t n_images = 0;
  double read_seconds = 0, seconds = 0;
  cae::Device device = cae::Device::cpu;
  double probability_seconds = 0;
  // Stopped between units at plan.units' request (its logs hold the finished ones): no
  // classifier was fitted.
  bool interrupted = false;
};
std::string report_fit(const Classifier& clf, const FitSummary& s);

}  // namespace svm
