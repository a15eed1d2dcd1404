// svm-eval: predict a features split with an svm-fit (or libsvm) model; accuracy, confusion
// matrix and per-class metrics.
#include <omp.h>

#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/error.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/libsvm_data.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/eval_file.h"
#include "kernels/svm/evaluate.h"
#include "kernels/svm/group_fit.h"

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
  app.add_option("--model", opt.model, "svm-fit model file (svm-model), or a libsvm model (svm-train)")
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

void evaluate(const Options& opt, const cae::CommonOptions& common) {
  if (opt.limit < 0) throw cae::UsageError("--limit must be >= 0");
  if (opt.features.empty() == opt.test.empty()) throw cae::UsageError("give one of --features and --test");
  const std::string file = opt.test.empty() ? opt.features : opt.test;
  // The inputs are hashed from the first moment, while the GPU is checked and the inputs are
  // read: a fresh model is the largest input (1.3 GB for CIFAR-10's, ~1.15 s of SHA-256), and
  // hashing it only after loading it left svm-eval waiting 0.5-0.8 s.
  cae::BackgroundHashes hashes(opt.reject.empty() ? std::vector<std::string>{opt.model, file}
                                                  : std::vector<std::string>{opt.model, file, opt.reject});
  // The CUDA driver is asked from here on, beside the read (common/device.h).
  const cae::DeviceChoice choice(common.device);
  if (opt.group.launch > 0) {
    cae::launch_group_checked(opt.group, choice.get() == cae::Device::gpu, common.output, /*share_cores=*/true);
    return;
  }
  // A rank of a group: the decision values of its slice of the rows; rank 0 writes.
  cae::GroupRank me(opt.group, common.output);
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  // The GPU's context and cuBLAS are made while the inputs are read: GPU 0's, or a rank's own.
  cae::cublas::preload(choice, me.place);
  svm::set_cpu_threads(opt.threads);
  cae::Stopwatch clock;
  std::unique_ptr<cae::AtomicOutput> out, data_out;
  if (lead) out = std::make_unique<cae::AtomicOutput>(common.output);
  if (lead && !opt.export_data.empty()) data_out = std::make_unique<cae::AtomicOutput>(opt.export_data);

  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  svm::Classifier clf = svm::load_classifier(opt.model, opt.libsvm_range);
  ae::FeatureRequest request;
  request.split = opt.split;
  request.limit = opt.limit;
  const cae::ViewSet tta = cae::ViewSet::parse(opt.tta);
  request.ask_views(tta, "--tta");
  request.model_classes = clf.file().class_names;
  request.model_dim = clf.n_features();
  ae::FeatureRows rows = ae::read_features(file, request);
  if (rows.format == ae::FeaturesFormat::plain)
    cae::log_info("%s is a plain features file: no encoder hash, so no encoder check", file.c_str());
  ae::FeatureSplit& s = rows.split;
  const int64_t n = rows.n;
  const int D = s.dim;
  // A libsvm model is read over the rows' width (its file names only the features it uses).
  if (D > clf.n_features() && cae::is_libsvm_text(opt.model))
    clf = svm::load_classifier(opt.model, opt.libsvm_range, D);
  const svm::RowsOrigin origin{file, rows.what, D, rows.encoder_sha256, rows.class_names};
  svm::check_rows_fit_model(clf, opt.model, origin, opt.allow_mismatch);
  svm::Classifier one_class;
  if (!opt.reject.empty()) {
    one_class = svm::load_one_class(opt.reject);
    svm::check_reject_model(one_class, opt.reject, clf, opt.model, origin, opt.allow_mismatch);
  }
  if (n == 0) cae::fail_file(file, rows.what + " has no rows");
  const double read_s = clock.seconds();
  phase.emplace(cae::Phase::startup);  // what is left of the driver's answer
  const cae::Device device = choice.get();
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  phase.emplace(cae::Phase::compute);

  svm::Rejection rejection;  // of the unscaled rows, before clf scales them in place
  if (lead && !opt.reject.empty())
    rejection = svm::reject_outside(one_class, opt.reject, s.X.data(), n, tta.count(), device);
  cae::Stopwatch predict_clock;
  // Scaled rows are what libsvm's svm-predict reads with the exported model, so the export
  // sits between the two halves of decision_values; the originals only, the first n rows
  // (svm-predict has no test-time augmentation).
  clf.scale(s.X.data(), s.n);
  if (data_out) svm::write_libsvm_data(*data_out, s.X.data(), s.labels.data(), n, D);
  const std::vector<double> dec = svm::decision_values_on_group(clf, s.X.data(), n, tta.count(), device, group);
  if (!lead) {  // its rows' values are with rank 0, which writes the evaluation
    group.finish();
    return;
  }
  s.labels.resize(static_cast<size_t>(n));
  const svm::Evaluation e = svm::evaluate(clf, dec, std::move(s.labels), rows.class_names);
  svm::EvalRun run{opt.split, tta.spec(), cae::device_name(device), 0, predict_clock.seconds(), clf.model().n_sv(),
                   opt.decision_values ? &dec : nullptr, clf.model().n_pairs()};
  run.seconds = clock.seconds();

  const std::vector<cae::InputFile> inputs = hashes.get();
  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), common.output);
    svm::write_eval_file(w, e, run);
    if (!opt.reject.empty()) svm::write_rejection(w, rejection, e);
    cae::write_provenance(w, {"svm-eval", 1, cae::options_json(), inputs});
    w.close();
  }
  out->commit();
  if (data_out) data_out->commit();
  group.finish();
  phase.reset();

  const std::string outside = opt.reject.empty() ? "" : svm::rejection_summary(rejection, e);
  const std::string rows_of = tta.count() > 1 ? " (tta " + tta.spec() + ")" : "";
  cae::log_info(
      "%s: accuracy %.2f %% (%lld of %lld), macro-F1 %.4f%s, %lld support vectors, predict %.2f s, total %.2f s "
      "(read %.2f s), %s",
      opt.test.empty() ? (opt.split + " split of " + file + rows_of).c_str() : file.c_str(),
      100 * e.report.accuracy, static_cast<long long>(e.correct), static_cast<long long>(n), e.report.macro_f1,
      outside.c_str(), static_cast<long long>(run.n_sv), run.predict_seconds, run.seconds, read_s, run.device.c_str());
  if (e.has_probabilities()) cae::log_info("log-loss %.4f (probabilities from the model's pair sigmoids)", e.log_loss);
  if (!cae::is_quiet()) fputs(svm::eval_table(e).c_str(), stderr);
  cae::JsonObject json;
  json.add("tool", kInfo.name).add("output", common.output);
  svm::add_eval_json(json, e, run);
  if (!opt.reject.empty()) svm::add_rejection_json(json, rejection, e);
  cae::emit_json(common, json.add_raw("phases", cae::phases_json()).str());
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, evaluate); }
