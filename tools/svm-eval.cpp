// svm-eval: predict a features split with an svm-fit (or libsvm) model; accuracy, confusion
// matrix and per-class metrics. The work is svm::run_evaluation (kernels/svm/eval_request.h);
// this file turns options into an EvalRequest and reads the rows.
#include <string>

#include "common/cli.h"
#include "common/error.h"
#include "common/group.h"
#include "common/json.h"
#include "common/view_set.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/eval_request.h"

namespace {

const cae::ToolInfo kInfo{"svm-eval", "classify features with an svm-fit model; accuracy, confusion matrix, metrics",
                          "svm-eval --model data/svm.h5 --features data/features.h5 --split test -o data/eval.h5\n"
                          "  svm-eval --model data/svm.h5 --features data/features.h5 --tta flip,shift:2 -o data/eval.h5\n"
                          "  svm-eval --model a1a.model --libsvm-range a1a.range --test a1a.t -o eval.h5",
                          true, true, "try --limit, or --device cpu"};

struct Options {
  std::string model, features, test, split = "test", tta = "none", export_data, libsvm_range, reject;
  bool decision_values = false;
  bool allow_mismatch = false;
  int64_t limit = 0;
  int threads = 0;
  cae::GroupOptions group;
};

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--model", opt.model,
                 "svm-fit model file (svm-model; of svm-fit --approx, a nystroem model, which is not a libsvm model "
                 "and predicts on the CPU), or a libsvm model (svm-train)")
      ->required();
  app.add_option("--features", opt.features,
                 "Features file: ae-features, plain HDF5 (docs/FORMATS.md) or libsvm text");
  app.add_option("--test", opt.test, "A separate test file (libsvm text, or HDF5 read at --split)");
  app.add_option("--split", opt.split, "Which split of an HDF5 features file to classify");
  app.add_option("--libsvm-range", opt.libsvm_range,
                 "svm-scale -s range file: scales the features for a libsvm model as svm-scale -r would");
  cae::default_means(app.add_option("--limit", opt.limit, "Classify only the first N rows (0 = all)")
                         ->check(CLI::NonNegativeNumber),
                     "all");
  cae::add_threads_option(app, opt.threads);
  cae::add_group_options(app, opt.group, "classifies its slice of the rows");
  cae::add_view_set_option(app, "--tta", opt.tta,
                           "Average each row's decision values over its views before voting: flip (its mirror), "
                           "shift:K (K shifted copies), flip,shift:K (and their mirrors), as ae-encode --flip / "
                           "--shifts wrote them; any views the file has, whatever the model's --augment");
  app.add_option("--reject", opt.reject,
                 "A one-class model (svm-fit --kind one-class) of the training features: also count the rows "
                 "outside it (/inside, n_outside, outside_fraction, accuracy_inside)");
  app.add_flag("--decision-values", opt.decision_values, "Also store /decision_values [N, k(k-1)/2]");
  app.add_flag("--allow-mismatch", opt.allow_mismatch,
               "Classify features of another encoder than the model's training features (refused otherwise)");
  cae::output_file(app.add_option("--export-libsvm-data", opt.export_data,
                                  "Also write the scaled features in libsvm's text format (for svm-predict)"));
}

// The rows of `file` at --split, their --tta views, in any features format (ae::read_features),
// as svm::run_evaluation takes them.
svm::EvalRows read_rows(const Options& opt, const std::string& file, const cae::ViewSet& tta,
                        const svm::Classifier& clf) {
  ae::FeatureRequest request;
  request.split = opt.split;
  request.limit = opt.limit;
  request.ask_views(tta, "--tta");
  request.model_classes = clf.file().class_names;
  request.model_dim = clf.n_features();
  ae::FeatureRows r = ae::read_features(file, request);
  return {std::move(r.split.X), std::move(r.split.labels), r.n, r.split.n,
          {file, r.what, r.split.dim, r.encoder_sha256, r.class_names}, r.format == ae::FeaturesFormat::plain};
}

void evaluate(const Options& opt, const cae::CommonOptions& common) {
  if (opt.limit < 0) throw cae::UsageError("--limit must be >= 0");
  if (opt.features.empty() == opt.test.empty()) throw cae::UsageError("give one of --features and --test");
  const std::string file = opt.test.empty() ? opt.features : opt.test;
  svm::EvalRequest req;
  req.model = opt.model;
  req.libsvm_range = opt.libsvm_range;
  req.reject = opt.reject;
  req.file = file;
  req.separate_test = !opt.test.empty();
  req.output = common.output;
  req.export_data = opt.export_data;
  req.device = common.device;
  req.split = opt.split;
  req.tta = opt.tta;
  req.decision_values = opt.decision_values;
  req.allow_mismatch = opt.allow_mismatch;
  req.threads = opt.threads;
  req.group = opt.group;
  req.read_rows = [&](const cae::ViewSet& tta, const svm::Classifier& clf) { return read_rows(opt, file, tta, clf); };
  const std::string json = svm::run_evaluation(req);
  if (!json.empty()) cae::emit_json(common, json);  // rank 0's
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, evaluate); }
