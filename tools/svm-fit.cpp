// svm-fit: train a one-vs-one RBF (or linear) C-SVM on encoder features, libsvm's way. The
// work is svm::run_fit (kernels/svm/fit_request.h); this file turns options into a FitRequest.
#include "common/cli.h"
#include "common/group.h"
#include "common/json.h"
#include "common/view_set.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/fit_request.h"

namespace {

const cae::ToolInfo kInfo{"svm-fit", "train a one-vs-one C-SVM (libsvm formulation) on encoder features",
                          "svm-fit --features data/features.h5 --C 10 --gamma scale -o data/svm.h5\n"
                          "  svm-fit --features data/features.h5 --cv 5 --C 1,10,100 --gamma 0.5x,scale,2x -o data/svm.h5\n"
                          "  svm-fit --features data/features.h5 --augment flip,shift:2 --probability -o data/svm.h5",
                          true, true, "try --train-limit or a smaller --cache-mb, or --device cpu"};

struct Options {
  std::string features, kernel = "rbf", C = "10", gamma = "scale", scale = "standard", augment = "none";
  std::string export_libsvm, class_weight = "none", kind = "c-svc", cv_scoring = "accuracy", approx;
  double tol = 1e-3, nu = 0.5;
  const CLI::Option* nu_option = nullptr;  // whether --nu was given: c-svc refuses it (svm::plan_kind)
  int64_t approx_seed = 1;
  const CLI::Option* approx_seed_option = nullptr;  // the exact SVM refuses it (svm::plan_approx)
  int64_t cache_mb = 0, train_limit = 0, cv = 0, cv_seed = 1;
  int threads = 0;
  bool probability = false, resume = false;
  cae::GroupOptions group;
};

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--features", opt.features,
                 "Features: an ae-encode or plain HDF5 file (uses /train) or libsvm text (docs/FORMATS.md)")
      ->required();
  app.add_option("--kernel", opt.kernel, "Kernel")->check(CLI::IsMember({"rbf", "linear"}));
  app.add_option("--kind", opt.kind,
                 "c-svc: the one-vs-one classifier; one-class: the support of the training rows (libsvm's -s 2, "
                 "labels ignored)")
      ->check(CLI::IsMember({"c-svc", "one-class"}));
  opt.nu_option = cae::default_means(
      app.add_option("--nu", opt.nu, "--kind one-class: 0 < nu <= 1, at most this fraction of training rows outside"),
      "0.5");
  app.add_option("--approx", opt.approx,
                 "nystroem:M: instead of the exact SVM, Nystroem features of M landmark rows (1 to 30000, at most "
                 "the training rows; drawn uniformly, seeded by --approx-seed) and a least-squares classifier on "
                 "them, in one pass over the rows, on the CPU; the model (kind nystroem) is not a libsvm model");
  opt.approx_seed_option =
      app.add_option("--approx-seed", opt.approx_seed, "--approx: seed of the landmarks' draw")
          ->check(CLI::NonNegativeNumber);
  app.add_option("--C", opt.C, "Penalty C (> 0); a comma-separated list (1,10,100) is searched with --cv");
  app.add_option("--gamma", opt.gamma,
                 "rbf gamma: scale = 1/(D*Var(X)), auto = 1/D, a multiple of scale (0.5x, 2x) or a number > 0; "
                 "a comma-separated list is searched with --cv");
  cae::default_means(
      app.add_option("--cv", opt.cv,
                     "Stratified K-fold cross-validation on the training rows (2 <= K <= the smallest class; "
                     "0 = none); with --C/--gamma lists, of every pair, and the best one becomes the model")
          ->check(CLI::NonNegativeNumber),
      "none");
  app.add_option("--cv-seed", opt.cv_seed, "Seed of the folds' shuffle")->check(CLI::NonNegativeNumber);
  app.add_option("--cv-scoring", opt.cv_scoring,
                 "What picks the --cv pair: accuracy (pooled over the folds), or balanced_accuracy / macro_f1 / "
                 "log_loss (mean over the folds, as scikit-learn's GridSearchCV); log_loss also fits each fit's "
                 "probability model: 5 more fits on 4/5 of its rows, ~6x the fits")
      ->check(CLI::IsMember({"accuracy", "balanced_accuracy", "macro_f1", "log_loss"}));
  cae::add_view_set_option(app, "--augment", opt.augment,
                           "Also train on other views of the images (flip, shift:K, flip,shift:K: ae-encode --flip "
                           "/ --shifts); with --cv and --probability an image's views share a fold");
  app.add_flag("--probability", opt.probability,
               "Also fit probability estimates (libsvm's -b 1: per-pair sigmoids on 5-fold cross-validated "
               "decision values, seeded by --cv-seed); svm-eval then writes /probabilities and the log-loss");
  app.add_option("--class-weight", opt.class_weight,
               "Weights of C per class (libsvm's -wi): balanced = n / (k * n_class), or NAME:W,NAME:W,... "
               "(class names or labels; the others weigh 1); in every fit, cross-validation and probability fold");
  app.add_flag("--resume", opt.resume,
               "Continue the --cv and --probability folds of a run stopped by SIGUSR1/SIGTERM (exit 75) from "
               "<-o>.resume.h5; without that file, start from the beginning");
  app.add_option("--scale", opt.scale, "Feature standardisation (mean/std of the training rows)")
      ->check(CLI::IsMember({"standard", "none"}));
  app.add_option("--tol", opt.tol, "Stopping tolerance on the KKT gap (libsvm -e)");
  cae::default_means(app.add_option("--cache-mb", opt.cache_mb, "Memory for kernel values, MB, on either device: the "
                                    "whole matrix where it fits (a class pair's on the CPU, all pairs' on the GPU), "
                                    "else the working-set solver's cached kernel rows, at least one working set's "
                                    "1,024 rows of a pair")
                         ->check(CLI::PositiveNumber),
                     "CPU: half the host memory left after the training rows, shared by a group's ranks; GPU: "
                     "what the device has free");
  cae::default_means(app.add_option("--train-limit", opt.train_limit,
                                    "Use the first N training rows (0 = all; more than there are = all, with "
                                    "a warning)")
                         ->check(CLI::NonNegativeNumber),
                     "all");
  cae::add_threads_option(app, opt.threads);
  cae::output_file(app.add_option("--export-libsvm", opt.export_libsvm,
                                  "Also write the model in libsvm's text format (for svm-predict on scaled data; "
                                  "not with --approx: a nystroem model is not a libsvm model)"));
  cae::add_group_options(app, opt.group,
                         "fits its share of the class pairs, of the cross-validation's (fold, gamma) cells and "
                         "of the probability folds");
}

// The training rows in any features format (ae::read_training_rows), as svm::run_fit takes them.
svm::FitRows read_rows(const std::string& path, int64_t limit, const cae::ViewSet& views, bool keep_float16) {
  ae::FeatureRows r = ae::read_training_rows(path, limit, views, keep_float16);
  ae::FeatureSplit& s = r.split;
  return {std::move(s.X), std::move(s.X16), std::move(s.labels), r.n, s.n, s.dim, s.float16,
          std::move(r.class_names), std::move(r.encoder_sha256)};
}

void fit(const Options& opt, const cae::CommonOptions& common) {
  svm::FitRequest req;
  req.features = opt.features;
  req.output = common.output;
  req.export_libsvm = opt.export_libsvm;
  req.device = common.device;
  req.kernel = opt.kernel;
  req.C = opt.C;
  req.gamma = opt.gamma;
  req.scale = opt.scale;
  req.augment = opt.augment;
  req.class_weight = opt.class_weight;
  req.kind = opt.kind;
  req.cv_scoring = opt.cv_scoring;
  req.approx = opt.approx;
  req.approx_seed = opt.approx_seed;
  req.approx_seed_given = opt.approx_seed_option->count() > 0;
  req.tol = opt.tol;
  req.nu = opt.nu;
  req.nu_given = opt.nu_option->count() > 0;
  req.cache_mb = opt.cache_mb;
  req.train_limit = opt.train_limit;
  req.cv = opt.cv;
  req.cv_seed = opt.cv_seed;
  req.threads = opt.threads;
  req.probability = opt.probability;
  req.resume = opt.resume;
  req.group = opt.group;
  req.read_rows = [&](const cae::ViewSet& views, bool keep_float16) {
    return read_rows(opt.features, opt.train_limit, views, keep_float16);
  };
  const std::string json = svm::run_fit(std::move(req));
  if (!json.empty()) cae::emit_json(common, json);  // rank 0's
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, fit); }
