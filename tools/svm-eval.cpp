// svm-eval: predict a features split with an svm-fit model; accuracy and confusion matrix.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
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
#include "kernels/svm/classifier.h"
#include "kernels/svm/group_fit.h"

namespace {

const cae::ToolInfo kInfo{"svm-eval", "classify encoder features with an svm-fit model; accuracy and confusion matrix",
                          "svm-eval --model data/svm.h5 --features data/features.h5 --split test -o data/eval.h5\n"
                          "  svm-eval --model data/svm.h5 --features data/features.h5 --tta flip -o data/eval.h5", true,
                          true, "try --limit, or --device cpu"};

struct Options {
  std::string model, features, split = "test", tta = "none", export_data;
  bool decision_values = false;
  bool allow_mismatch = false;
  int64_t limit = 0;
  int threads = 0;
  cae::GroupOptions group;
};

std::string json_array(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + cae::json_number(v[i]);
  return s + "]";
}

void print_table(const std::vector<std::string>& names, const std::vector<int64_t>& confusion, int K) {
  if (cae::is_quiet()) return;
  std::string s = "class        accuracy      n   predicted as:\n             ";
  s += "                    ";
  for (int c = 0; c < K; ++c) s += cae::strprintf(" %5.5s", names[c].c_str());
  s += "\n";
  for (int t = 0; t < K; ++t) {
    int64_t row = 0;
    for (int c = 0; c < K; ++c) row += confusion[t * K + c];
    std::string acc = row ? cae::strprintf("%6.2f %%", 100.0 * confusion[t * K + t] / row) : std::string("     -  ");
    s += cae::strprintf("%-12.12s %s %6lld   ", names[t].c_str(), acc.c_str(), static_cast<long long>(row));
    for (int c = 0; c < K; ++c) s += cae::strprintf(" %5lld", static_cast<long long>(confusion[t * K + c]));
    s += "\n";
  }
  fputs(s.c_str(), stderr);
}

void evaluate(const Options& opt, const cae::CommonOptions& common) {
  if (opt.limit < 0) throw cae::UsageError("--limit must be >= 0");
  const cae::Device device = cae::resolve_device(common.device);
  if (opt.group.launch > 0) {
    cae::launch_group_checked(opt.group, device == cae::Device::gpu, common.output,
                              /*share_cores=*/true);
    return;
  }
  // A rank of a group: the decision values of its slice of the rows; rank 0 writes.
  cae::GroupRank me(opt.group, common.output);
  const cae::GroupPlace& place = me.place;
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  if (place.grouped() && device == cae::Device::gpu) cae::select_group_gpu(place.local_rank);
  svm::set_cpu_threads(opt.threads);
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  cae::Stopwatch clock;
  std::unique_ptr<cae::AtomicOutput> out, data_out;
  if (lead) out = std::make_unique<cae::AtomicOutput>(common.output);
  if (lead && !opt.export_data.empty()) data_out = std::make_unique<cae::AtomicOutput>(opt.export_data);

  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  const svm::Classifier clf = svm::Classifier::load(opt.model);
  const svm::Model& m = clf.model();
  ae::FeaturesReader reader(opt.features);  // (both refuse what is not a regular HDF5 file first)
  cae::BackgroundHashes hashes({opt.model, opt.features});
  const int64_t available = reader.count(opt.split);
  const int D = reader.dim(opt.split);
  if (D != clf.n_features())
    cae::fail_file(opt.features, "/" + opt.split + "/features has " + std::to_string(D) + " features per row, but " +
                                     opt.model + " was trained on " + std::to_string(clf.n_features()));
  // Features of another encoder would be classified without complaint (same width) and
  // wrongly: the files carry the encoder's hash, so compare them.
  const std::string trained_on = clf.file().encoder_sha256, encoded_by = reader.encoder_sha256();
  if (!trained_on.empty() && !encoded_by.empty() && trained_on != encoded_by && !opt.allow_mismatch)
    cae::fail_file(opt.features, "was encoded by another model (sha256 " + encoded_by.substr(0, 12) + "…) than the one " +
                                     opt.model + " was trained on (" + trained_on.substr(0, 12) +
                                     "…); encode with that model, or pass --allow-mismatch");
  const std::vector<std::string> names = reader.class_names();
  const int K = static_cast<int>(names.size());
  for (int c : m.classes)
    if (c < 0 || c >= K)
      cae::fail_file(opt.model, "class " + std::to_string(c) + " is not one of the " + std::to_string(K) +
                                    " classes of " + opt.features);
  const int64_t n = opt.limit > 0 ? std::min(opt.limit, available) : available;
  if (n == 0) cae::fail_file(opt.features, "/" + opt.split + "/features has no rows");
  // --tta flip: the n rows, then their n mirrors, in one buffer; each image's decision values
  // are the mean of its two rows'.
  const bool tta = opt.tta == "flip";
  const int views = tta ? 2 : 1;
  if (tta && !reader.has_flipped(opt.split))
    cae::fail_file(opt.features, "/" + opt.split + "/features_flip is missing: --tta flip needs the features of the "
                                 "mirrored images (run ae-encode --flip)");
  ae::FeatureSplit s = tta ? reader.read_augmented(opt.split, n) : reader.read(opt.split, n);
  const double read_s = clock.seconds();
  phase.emplace(cae::Phase::compute);

  cae::Stopwatch predict_clock;
  // Scaled rows are what libsvm's svm-predict reads with the exported model, so the export
  // sits between the two halves of decision_values.
  clf.scale(s.X.data(), n * views);
  // The originals only: libsvm's svm-predict has no test-time augmentation.
  if (data_out) svm::write_libsvm_data(*data_out, s.X.data(), s.labels.data(), n, D);
  const std::vector<double> dec = svm::decision_values_on_group(clf, s.X.data(), n, views, device, group);
  if (!lead) {  // its rows' values are with rank 0, which writes the evaluation
    group.finish();
    return;
  }
  s.labels.resize(static_cast<size_t>(n));
  const std::vector<int32_t> pred = clf.vote(dec, n);
  const int pairs = m.n_pairs();
  // Probabilities (a model fitted with --probability), from the decision values voted on —
  // with --tta flip, the averages. Stored with a column per class of the features file, so
  // column c is class c as in /confusion; a class the model never saw has probability 0.
  std::vector<double> prob;
  double log_loss = std::nan("");
  if (clf.has_probability()) {
    const std::vector<double> pk = clf.probabilities(dec, n);
    const size_t km = m.classes.size();
    prob.assign(static_cast<size_t>(n) * K, 0.0);
    double sum = 0;
    for (int64_t r = 0; r < n; ++r) {
      for (size_t c = 0; c < km; ++c) prob[static_cast<size_t>(r) * K + m.classes[c]] = pk[r * km + c];
      // scikit-learn's log_loss clips p to [1e-15, 1 - 1e-15]: a confident mistake costs
      // -log(1e-15) = 34.5, not infinity.
      sum -= std::log(std::clamp(prob[static_cast<size_t>(r) * K + s.labels[r]], 1e-15, 1 - 1e-15));
    }
    log_loss = sum / static_cast<double>(n);
  }
  const double predict_s = predict_clock.seconds();

  std::vector<int64_t> confusion(static_cast<size_t>(K) * K, 0);
  int64_t correct = 0;
  for (int64_t r = 0; r < n; ++r) {
    ++confusion[static_cast<size_t>(s.labels[r]) * K + pred[r]];
    correct += s.labels[r] == pred[r];
  }
  const double accuracy = n ? static_cast<double>(correct) / static_cast<double>(n) : std::nan("");
  std::vector<double> per_class(K);
  for (int t = 0; t < K; ++t) {
    int64_t row = 0;
    for (int c = 0; c < K; ++c) row += confusion[t * K + c];
    per_class[t] = row ? static_cast<double>(confusion[t * K + t]) / static_cast<double>(row) : std::nan("");
  }
  const double total_s = clock.seconds();

  const std::vector<cae::InputFile> inputs = hashes.get();
  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), common.output);
    w.write("/predictions", pred);
    w.write("/labels", s.labels);
    w.write("/confusion", confusion.data(), {static_cast<uint64_t>(K), static_cast<uint64_t>(K)});
    if (opt.decision_values)
      w.write("/decision_values", dec.data(), {static_cast<uint64_t>(n), static_cast<uint64_t>(pairs)});
    if (!prob.empty()) {
      w.write("/probabilities", prob.data(), {static_cast<uint64_t>(n), static_cast<uint64_t>(K)});
      w.set_attr("/", "log_loss", log_loss);
    }
    w.set_attr("/", "accuracy", accuracy);
    w.set_attr("/", "per_class_accuracy", per_class);
    w.set_attr("/", "class_names", names);
    w.set_attr("/", "split", opt.split);
    w.set_attr("/", "tta", opt.tta);
    w.set_attr("/", "seconds", total_s);
    w.set_attr("/", "predict_seconds", predict_s);
    w.set_attr("/", "device", cae::device_name(device));
    w.set_attr("/", "n_sv", m.n_sv());
    cae::write_provenance(w, {"svm-eval", 1, cae::options_json(), inputs});
    w.close();
  }
  out->commit();
  if (data_out) data_out->commit();
  group.finish();
  phase.reset();

  cae::log_info("%s split of %s%s: accuracy %.2f %% (%lld of %lld), %lld support vectors, predict %.2f s, total %.2f s "
                "(read %.2f s), %s",
                opt.split.c_str(), opt.features.c_str(), tta ? " (tta flip)" : "", 100 * accuracy,
                static_cast<long long>(correct), static_cast<long long>(n), static_cast<long long>(m.n_sv()), predict_s,
                total_s, read_s, cae::device_name(device));
  if (!prob.empty()) cae::log_info("log-loss %.4f (probabilities from the model's pair sigmoids)", log_loss);
  print_table(names, confusion, K);
  std::string conf = "[";
  for (int t = 0; t < K; ++t) {
    conf += t ? ",[" : "[";
    for (int c = 0; c < K; ++c) conf += (c ? "," : "") + std::to_string(confusion[t * K + c]);
    conf += "]";
  }
  conf += "]";
  std::string names_json = "[";
  for (int c = 0; c < K; ++c) names_json += (c ? "," : "") + cae::json_escape(names[c]);
  names_json += "]";
  cae::JsonObject json;
  json.add("tool", kInfo.name)
      .add("output", common.output)
      .add("split", opt.split)
      .add("tta", opt.tta)
      .add("n", n)
      .add("correct", correct)
      .add("accuracy", accuracy)
      .add_raw("per_class_accuracy", json_array(per_class))
      .add_raw("class_names", names_json)
      .add_raw("confusion", conf)
      .add("n_sv", m.n_sv())
      .add("predict_seconds", predict_s)
      .add("seconds", total_s)
      .add_raw("phases", cae::phases_json())
      .add("device", cae::device_name(device));
  if (!prob.empty()) json.add("log_loss", log_loss);
  cae::emit_json(common, json.str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(
      argc, argv, kInfo, common,
      [&](CLI::App& app) {
        app.add_option("--model", opt.model, "svm-fit model file (svm-model)")->required();
        app.add_option("--features", opt.features, "Encoder features file (ae-features)")->required();
        app.add_option("--split", opt.split, "Which split of the features file to classify");
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
      },
      [&] { evaluate(opt, common); });
}
