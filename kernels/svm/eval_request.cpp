#include "kernels/svm/eval_request.h"

#include <omp.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/libsvm_data.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/svm/eval_file.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/model_file.h"

namespace svm {

namespace {
// Whether `path` is a nystroem model (svm-fit --approx), from its root attribute alone: asked
// before a group's ranks start, which would each load the whole model. A file that cannot be
// read so is left to the loader, which says what is wrong with it.
bool is_nystroem_model(const std::string& path) {
  if (cae::is_libsvm_text(path)) return false;
  try {
    const cae::Hdf5Reader h5(path);
    return h5.has_attr("/", "kind") && h5.attr_string("/", "kind") == "nystroem";
  } catch (const std::runtime_error&) {
    return false;
  }
}

// A nystroem model's decision values depend on the thread count in their last bits (OpenBLAS's
// dgemm), so a group's ranks could not give one process's file bit for bit, which is what
// svm-eval's groups promise (docs/MULTI_GPU.md); and issue 63's groups are not written yet.
cae::UsageError nystroem_on_a_group(const std::string& model) {
  return cae::UsageError(model + " is a nystroem model (svm-fit --approx): it predicts in one process (no --ranks, "
                                 "--gpus or group place)");
}
}  // namespace

std::string run_evaluation(const EvalRequest& req) {
  const std::string& file = req.file;
  if (req.group.launch > 0 && is_nystroem_model(req.model)) throw nystroem_on_a_group(req.model);
  // The inputs are hashed from the first moment, while the GPU is checked and the inputs are
  // read: a fresh model is the largest input, and hashing it only after loading it left
  // svm-eval waiting (docs/DECISIONS.md, "Hashes start first and read ahead").
  cae::BackgroundHashes hashes(req.reject.empty() ? std::vector<std::string>{req.model, file}
                                                  : std::vector<std::string>{req.model, file, req.reject});
  // The CUDA driver is asked from here on, beside the read (common/device.h).
  const cae::DeviceChoice choice(req.device);
  if (req.group.launch > 0) {
    cae::launch_group_checked(req.group, choice.get() == cae::Device::gpu, req.output, /*share_cores=*/true);
    return "";
  }
  // A rank of a group: the decision values of its slice of the rows; rank 0 writes.
  cae::GroupRank me(req.group, req.output);
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  // The GPU's context and cuBLAS are made while the inputs are read: GPU 0's, or a rank's own.
  cae::cublas::preload(choice, me.place);
  set_cpu_threads(req.threads);
  cae::Stopwatch clock;
  std::unique_ptr<cae::AtomicOutput> out, data_out;
  if (lead) out = std::make_unique<cae::AtomicOutput>(req.output);
  if (lead && !req.export_data.empty()) data_out = std::make_unique<cae::AtomicOutput>(req.export_data);

  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  Classifier clf = load_classifier(req.model, req.libsvm_range);
  const cae::ViewSet tta = cae::ViewSet::parse(req.tta);
  EvalRows s = req.read_rows(tta, clf);
  if (s.plain) cae::log_info("%s is a plain features file: no encoder hash, so no encoder check", file.c_str());
  const int64_t n = s.n;
  const int D = s.origin.dim;
  // A libsvm model is read over the rows' width (its file names only the features it uses).
  if (D > clf.n_features() && cae::is_libsvm_text(req.model))
    clf = load_classifier(req.model, req.libsvm_range, D);
  const RowsOrigin& origin = s.origin;
  check_rows_fit_model(clf, req.model, origin, req.allow_mismatch);
  Classifier one_class;
  if (!req.reject.empty()) {
    one_class = load_one_class(req.reject);
    check_reject_model(one_class, req.reject, clf, req.model, origin, req.allow_mismatch);
  }
  if (n == 0) cae::fail_file(file, origin.what + " has no rows");
  const double read_s = clock.seconds();
  phase.emplace(cae::Phase::startup);  // what is left of the driver's answer
  if (clf.is_approx() && group.world() > 1) throw nystroem_on_a_group(req.model);
  const cae::Device device = choice.get();
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  phase.emplace(cae::Phase::compute);

  Rejection rejection;  // of the unscaled rows, before clf scales them in place
  if (lead && !req.reject.empty())
    rejection = reject_outside(one_class, req.reject, s.X.data(), n, tta.count(), device);
  cae::Stopwatch predict_clock;
  // Scaled rows are what libsvm's svm-predict reads with the exported model, so the export
  // sits between the two halves of decision_values; the originals only, the first n rows
  // (svm-predict has no test-time augmentation).
  clf.scale(s.X.data(), s.rows);
  if (data_out) write_libsvm_data(*data_out, s.X.data(), s.labels.data(), n, D);
  const std::vector<double> dec = decision_values_on_group(clf, s.X.data(), n, tta.count(), device, group);
  if (!lead) {  // its rows' values are with rank 0, which writes the evaluation
    group.finish();
    return "";
  }
  s.labels.resize(static_cast<size_t>(n));
  const Evaluation e = evaluate(clf, dec, std::move(s.labels), origin.class_names);
  EvalRun run{req.split, tta.spec(), cae::device_name(device), 0, predict_clock.seconds(), clf.model().n_sv(),
              req.decision_values ? &dec : nullptr, clf.model().n_pairs()};
  run.seconds = clock.seconds();

  const std::vector<cae::InputFile> inputs = hashes.get();
  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), req.output);
    write_eval_file(w, e, run);
    if (!req.reject.empty()) write_rejection(w, rejection, e);
    cae::write_provenance(w, {"svm-eval", 1, cae::options_json(), inputs});
    w.close();
  }
  out->commit();
  if (data_out) data_out->commit();
  group.finish();
  phase.reset();

  const std::string outside = req.reject.empty() ? "" : rejection_summary(rejection, e);
  const std::string rows_of = tta.count() > 1 ? " (tta " + tta.spec() + ")" : "";
  cae::log_info(
      "%s: accuracy %.2f %% (%lld of %lld), macro-F1 %.4f%s, %lld %s, predict %.2f s, total %.2f s "
      "(read %.2f s), %s",
      !req.separate_test ? (req.split + " split of " + file + rows_of).c_str() : file.c_str(),
      100 * e.report.accuracy, static_cast<long long>(e.correct), static_cast<long long>(n), e.report.macro_f1,
      outside.c_str(), static_cast<long long>(clf.is_approx() ? clf.file().approx.M : run.n_sv),
      clf.is_approx() ? "Nystroem landmarks" : "support vectors", run.predict_seconds, run.seconds, read_s, run.device.c_str());
  if (e.has_probabilities()) cae::log_info("log-loss %.4f (probabilities from the model's pair sigmoids)", e.log_loss);
  if (!cae::is_quiet()) fputs(eval_table(e).c_str(), stderr);
  cae::JsonObject json;
  json.add("tool", "svm-eval").add("output", req.output);
  add_eval_json(json, e, run);
  if (!req.reject.empty()) add_rejection_json(json, rejection, e);
  return json.add_raw("phases", cae::phases_json()).str();
}

}  // namespace svm
