// svm-eval: predict a features split with an svm-fit (or libsvm) model; accuracy, confusion
// matrix and per-class metrics.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/error.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/eval_file.h"
#include "kernels/svm/evaluate.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/libsvm_format.h"

namespace {

const cae::ToolInfo kInfo{"svm-eval", "classify features with an svm-fit model; accuracy, confusion matrix, metrics",
                          "svm-eval --model data/svm.h5 --features data/features.h5 --split test -o data/eval.h5\n"
                          "  svm-eval --model data/svm.h5 --features data/features.h5 --tta flip -o data/eval.h5\n"
                          "  svm-eval --model a1a.model --libsvm-range a1a.range --test a1a.t -o eval.h5",
                          true, true, "try --limit, or --device cpu"};

struct Options {
  std::string model, features, test, split = "test", tta = "none", export_data, libsvm_range;
  bool decision_values = false;
  bool allow_mismatch = false;
  int64_t limit = 0;
  int threads = 0;
  cae::GroupOptions group;
};

// The rows to classify, from an HDF5 features file (ae-features or plain) or libsvm text;
// clf is (re)loaded over their width where it is a libsvm model.
struct Rows {
  ae::FeatureSplit s;
  std::vector<std::string> names;
  std::string encoder_sha256;
  std::string what = "its rows";  // names the rows in messages: "/test/features" of an HDF5 file
};

Rows read_rows(const Options& opt, const std::string& file, svm::Classifier& clf, int64_t& n) {
  Rows rows;
  const bool tta = opt.tta == "flip";
  if (svm::is_libsvm_text(file)) {
    if (tta) throw cae::UsageError("--tta flip needs an HDF5 features file with /SPLIT/features_flip");
    svm::LibsvmData d = svm::read_libsvm_data(file, clf.file().class_names, clf.n_features());
    if (d.dim > clf.n_features() && svm::is_libsvm_text(opt.model))
      clf = svm::load_classifier(opt.model, opt.libsvm_range, d.dim);
    n = opt.limit > 0 ? std::min(opt.limit, d.n) : d.n;
    rows.s.X.assign(d.X.begin(), d.X.begin() + n * d.dim);
    rows.s.labels.assign(d.labels.begin(), d.labels.begin() + n);
    rows.s.n = n;
    rows.s.dim = d.dim;
    rows.names = d.class_names;
    return rows;
  }
  ae::FeaturesReader reader(file);
  const int64_t available = reader.count(opt.split);
  if (svm::is_libsvm_text(opt.model)) clf = svm::load_classifier(opt.model, opt.libsvm_range, reader.dim(opt.split));
  n = opt.limit > 0 ? std::min(opt.limit, available) : available;
  if (tta && !reader.has_flipped(opt.split))
    cae::fail_file(file, "/" + opt.split + "/features_flip is missing: --tta flip needs the features of the "
                         "mirrored images (run ae-encode --flip)");
  if (n > 0) rows.s = tta ? reader.read_augmented(opt.split, n) : reader.read(opt.split, n);
  rows.s.dim = reader.dim(opt.split);
  rows.names = reader.class_names();
  rows.encoder_sha256 = reader.encoder_sha256();
  rows.what = "/" + opt.split + "/features";
  if (reader.plain()) cae::log_info("%s is a plain features file: no encoder hash, so no encoder check", file.c_str());
  return rows;
}

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
  cae::default_means(app.add_option("--threads", opt.threads, "CPU threads")->check(CLI::NonNegativeNumber),
                     "OMP_NUM_THREADS, else all cores; with --ranks N, the cores / N each");
  cae::add_group_options(app, opt.group, "classifies its slice of the rows");
  app.add_option("--tta", opt.tta,
                 "flip: average each row's decision values with those of its mirror (/SPLIT/features_flip, "
                 "ae-encode --flip) before voting")
      ->check(CLI::IsMember({"none", "flip"}));
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
  const cae::Device device = cae::resolve_device(common.device);
  if (opt.group.launch > 0) {
    cae::launch_group_checked(opt.group, device == cae::Device::gpu, common.output, /*share_cores=*/true);
    return;
  }
  // A rank of a group: the decision values of its slice of the rows; rank 0 writes.
  cae::GroupRank me(opt.group, common.output);
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  if (me.place.grouped() && device == cae::Device::gpu) cae::select_group_gpu(me.place.local_rank);
  if (device == cae::Device::gpu) cae::cublas::preload();  // loads while the inputs are read
  svm::set_cpu_threads(opt.threads);
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  cae::Stopwatch clock;
  std::unique_ptr<cae::AtomicOutput> out, data_out;
  if (lead) out = std::make_unique<cae::AtomicOutput>(common.output);
  if (lead && !opt.export_data.empty()) data_out = std::make_unique<cae::AtomicOutput>(opt.export_data);

  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  svm::Classifier clf = svm::load_classifier(opt.model, opt.libsvm_range);
  cae::BackgroundHashes hashes({opt.model, file});
  int64_t n = 0;
  Rows rows = read_rows(opt, file, clf, n);
  ae::FeatureSplit& s = rows.s;
  const int D = s.dim;
  if (D != clf.n_features())
    cae::fail_file(file, rows.what + " has " + std::to_string(D) + " features per row, but " + opt.model +
                             " was trained on " + std::to_string(clf.n_features()));
  // Features of another encoder would be classified without complaint (same width) and
  // wrongly: the files carry the encoder's hash, so compare them.
  const std::string trained_on = clf.file().encoder_sha256, encoded_by = rows.encoder_sha256;
  if (!trained_on.empty() && !encoded_by.empty() && trained_on != encoded_by && !opt.allow_mismatch)
    cae::fail_file(file, "was encoded by another model (sha256 " + encoded_by.substr(0, 12) + "…) than the one " +
                             opt.model + " was trained on (" + trained_on.substr(0, 12) +
                             "…); encode with that model, or pass --allow-mismatch");
  for (int c : clf.model().classes)
    if (c < 0 || c >= static_cast<int>(rows.names.size()))
      cae::fail_file(opt.model, "class " + std::to_string(c) + " is not one of the " +
                                    std::to_string(rows.names.size()) + " classes of " + file);
  if (n == 0) cae::fail_file(file, rows.what + " has no rows");
  const bool tta = opt.tta == "flip";
  const double read_s = clock.seconds();
  phase.emplace(cae::Phase::compute);

  cae::Stopwatch predict_clock;
  // Scaled rows are what libsvm's svm-predict reads with the exported model, so the export
  // sits between the two halves of decision_values; the originals only (svm-predict has no
  // test-time augmentation).
  clf.scale(s.X.data(), s.n);
  if (data_out) svm::write_libsvm_data(*data_out, s.X.data(), s.labels.data(), n, D);
  const std::vector<double> dec = svm::decision_values_on_group(clf, s.X.data(), n, tta ? 2 : 1, device, group);
  if (!lead) {  // its rows' values are with rank 0, which writes the evaluation
    group.finish();
    return;
  }
  s.labels.resize(static_cast<size_t>(n));
  const svm::Evaluation e = svm::evaluate(clf, dec, std::move(s.labels), rows.names);
  svm::EvalRun run{opt.split, opt.tta, cae::device_name(device), 0, predict_clock.seconds(), clf.model().n_sv(),
                   opt.decision_values ? &dec : nullptr, clf.model().n_pairs()};
  run.seconds = clock.seconds();

  const std::vector<cae::InputFile> inputs = hashes.get();
  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), common.output);
    svm::write_eval_file(w, e, run);
    cae::write_provenance(w, {"svm-eval", 1, cae::options_json(), inputs});
    w.close();
  }
  out->commit();
  if (data_out) data_out->commit();
  group.finish();
  phase.reset();

  cae::log_info(
      "%s: accuracy %.2f %% (%lld of %lld), macro-F1 %.4f, %lld support vectors, predict %.2f s, total %.2f s "
      "(read %.2f s), %s",
      opt.test.empty() ? (opt.split + " split of " + file + (tta ? " (tta flip)" : "")).c_str() : file.c_str(),
      100 * e.report.accuracy, static_cast<long long>(e.correct), static_cast<long long>(n), e.report.macro_f1,
      static_cast<long long>(run.n_sv), run.predict_seconds, run.seconds, read_s, run.device.c_str());
  if (e.has_probabilities()) cae::log_info("log-loss %.4f (probabilities from the model's pair sigmoids)", e.log_loss);
  if (!cae::is_quiet()) fputs(svm::eval_table(e).c_str(), stderr);
  cae::JsonObject json;
  json.add("tool", kInfo.name).add("output", common.output);
  svm::add_eval_json(json, e, run);
  cae::emit_json(common, json.add_raw("phases", cae::phases_json()).str());
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, evaluate); }
