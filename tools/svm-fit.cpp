// svm-fit: train a one-vs-one RBF (or linear) C-SVM on encoder features, libsvm's way.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/device.h"
#include "common/error.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/probability.h"

namespace {

const cae::ToolInfo kInfo{"svm-fit", "train a one-vs-one C-SVM (libsvm formulation) on encoder features",
                          "svm-fit --features data/features.h5 --C 10 --gamma scale -o data/svm.h5\n"
                          "  svm-fit --features data/features.h5 --cv 5 --C 1,10,100 --gamma 0.5x,scale,2x -o data/svm.h5\n"
                          "  svm-fit --features data/features.h5 --augment flip --probability -o data/svm.h5",
                          true, true,
                          "try --train-limit or a smaller --cache-mb, or --device cpu"};

struct Options {
  std::string features, kernel = "rbf", C = "10", gamma = "scale", scale = "standard", augment = "none";
  std::string export_libsvm;
  double tol = 1e-3;
  int64_t cache_mb = 2048, train_limit = 0, cv = 0, cv_seed = 1;
  int threads = 0;
  bool probability = false;
  cae::GroupOptions group;
};

// libsvm's -b 1 draws 5 folds for its sigmoids; so do we (probability.h).
constexpr int kProbabilityFolds = 5;

void fit(const Options& opt, const cae::CommonOptions& common) {
  const std::vector<double> C_list = svm::parse_C_list(opt.C);
  const std::vector<std::string> gamma_list = svm::parse_gamma_list(opt.gamma);
  if (!(opt.tol > 0) || !std::isfinite(opt.tol)) throw cae::UsageError("--tol must be > 0");
  const bool grid = C_list.size() > 1 || gamma_list.size() > 1;
  if (grid && opt.cv == 0)
    throw cae::UsageError("--C and --gamma take more than one value only with --cv K (cross-validation picks the pair)");
  if (gamma_list.size() > 1 && opt.kernel == "linear") throw cae::UsageError("--kernel linear has no gamma to search");
  if (opt.kernel == "linear" && opt.gamma != "scale")  // "scale" is the default: not given
    throw cae::UsageError("--gamma " + opt.gamma + " has no effect with --kernel linear (leave it out)");
  // More folds than rows is refused once the rows are read (check_cv_folds); the clamp only
  // keeps the number an int until then.
  const int folds = static_cast<int>(std::min<int64_t>(opt.cv, 1 << 30));
  if (folds != 0) svm::check_cv_folds(folds, nullptr, 0, {});
  const cae::Device device = cae::resolve_device(common.device);
  if (opt.group.launch > 0) {
    cae::launch_group_checked(opt.group, device == cae::Device::gpu, common.output,
                              /*share_cores=*/true);
    return;
  }
  // A rank of a group: its share of the pairs, cells and folds; rank 0 alone logs and writes.
  cae::GroupRank me(opt.group, common.output);
  const cae::GroupPlace& place = me.place;
  cae::GroupExchange& group = me.exchange;
  const bool lead = group.lead();
  if (place.grouped() && device == cae::Device::gpu) cae::select_group_gpu(place.local_rank);
  svm::set_cpu_threads(opt.threads);
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  cae::Stopwatch clock;
  // Output paths are checked now, not after the fit (rank 0 writes them; the others nothing).
  std::unique_ptr<cae::AtomicOutput> out;
  if (lead) out = std::make_unique<cae::AtomicOutput>(common.output);
  std::unique_ptr<cae::AtomicOutput> libsvm_out;
  if (lead && !opt.export_libsvm.empty()) libsvm_out = std::make_unique<cae::AtomicOutput>(opt.export_libsvm);

  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  ae::FeaturesReader reader(opt.features);  // (refuses what is not a regular HDF5 file first)
  cae::BackgroundHashes hashes({opt.features});
  const int64_t available = reader.count("train");
  int64_t n = available;
  if (opt.train_limit > 0) {
    if (opt.train_limit > available)
      cae::log_warn("--train-limit %lld is larger than the %lld training rows of %s; using all %lld",
                    static_cast<long long>(opt.train_limit), static_cast<long long>(available),
                    opt.features.c_str(), static_cast<long long>(available));
    n = std::min(opt.train_limit, available);
  }
  // --augment flip: the n images, then their n mirrors, in one [2n, D] buffer (the reader
  // fills it in place; the Classifier scales it in place: one copy of the 2n rows in all).
  const bool flip = opt.augment == "flip";
  if (flip && !reader.has_flipped("train"))
    cae::fail_file(opt.features, "/train/features_flip is missing: --augment flip needs the features of the mirrored "
                                 "images (run ae-encode --flip)");
  ae::FeatureSplit train = flip ? reader.read_augmented("train", n) : reader.read("train", n);
  const int views = flip ? 2 : 1;
  const int64_t rows = train.n;  // n · views
  const int D = train.dim;
  std::set<int32_t> distinct(train.labels.begin(), train.labels.end());
  if (distinct.size() < 2)
    cae::fail_file(opt.features, "the " + std::to_string(n) + " training rows hold a single class (" +
                                     (distinct.empty() ? std::string("none") : std::to_string(*distinct.begin())) +
                                     "); an SVM needs at least two");
  const std::vector<std::string> names = reader.class_names();
  if (distinct.size() < names.size()) {  // e.g. --train-limit 5: said, not refused
    std::string missing;
    for (size_t c = 0; c < names.size(); ++c)
      if (!distinct.count(static_cast<int32_t>(c))) missing += (missing.empty() ? "" : ", ") + names[c];
    cae::log_warn("the %lld training rows hold %zu of the %zu classes (missing: %s); the model can never predict those",
                  static_cast<long long>(n), distinct.size(), names.size(), missing.c_str());
  }
  if (folds != 0) svm::check_cv_folds(folds, train.labels.data(), n, names);  // per image
  if (opt.probability) svm::check_sigmoid_data(train.labels.data(), n, opt.features);
  const double read_s = clock.seconds();
  phase.emplace(cae::Phase::compute);

  svm::ClassifierParams params;
  params.kernel = opt.kernel == "linear" ? svm::KernelType::linear : svm::KernelType::rbf;
  params.C = C_list[0];
  params.gamma = gamma_list[0];
  params.tol = opt.tol;
  params.standardize = opt.scale == "standard";
  params.cache_mb = opt.cache_mb;
  params.data_name = opt.features;
  params.group = place.grouped() ? &group : nullptr;
  if (place.grouped())
    cae::log_info("a group of %d ranks (%s): each fits its share of the class pairs%s; rank 0 writes %s", place.world,
                  place.source.c_str(), folds ? ", cross-validation cells" : "", common.output.c_str());
  const int pairs = static_cast<int>(distinct.size() * (distinct.size() - 1) / 2);
  std::vector<int64_t> class_sizes;  // in class order, for the bar of rank 0's share of the pairs
  for (int32_t c : distinct)
    class_sizes.push_back(std::count(train.labels.begin(), train.labels.end(), c));
  std::unique_ptr<cae::ProgressBar> bar;
  svm::FitProgress progress;
  progress.ready = [&](const svm::Classifier& c) {
    cae::log_info("%lld training rows%s x %d features (%d constant, dropped), %zu classes, gamma %.6g (%s), C %g, %s",
                  static_cast<long long>(rows), flip ? " (images + mirrors)" : "", D, D - c.n_features_kept(),
                  distinct.size(), c.resolved_gamma(), c.file().gamma_spec.c_str(), c.file().C,
                  cae::device_name(device));
    bar = std::make_unique<cae::ProgressBar>(
        "svm-fit", place.grouped() ? static_cast<int64_t>(svm::balance_pairs(class_sizes, place.world)[0].size()) : pairs,
        "pairs");
  };
  progress.pair = [&](int done, int) { bar->update(done); };
  svm::Classifier clf;
  svm::ModelSelection selection;
  if (folds != 0) {
    const size_t cells = C_list.size() * gamma_list.size();
    cae::log_info("cross-validation: %d folds (seed %lld), %zu C x %zu gamma = %zu fits", folds,
                  static_cast<long long>(opt.cv_seed), C_list.size(), gamma_list.size(), cells * folds);
    // The bar is drawn only on a terminal; the log gets the table once the search is done.
    cae::ProgressBar cv_bar("svm-fit cv", static_cast<int64_t>(cells * folds), "fits");
    // With mirrors, an image and its mirror share a fold (grouped_folds).
    selection = svm::cross_validate(train.X.data(), train.labels.data(), rows, D, params, C_list, gamma_list, folds,
                                    static_cast<uint64_t>(opt.cv_seed), device,
                                    [&](int done, int) { cv_bar.update(done); }, views);
    {
      const svm::ModelSelection& s = selection;
      cv_bar.finish();
      for (size_t c = 0; c < s.C.size(); ++c)
        for (size_t g = 0; g < s.gamma.size(); ++g)
          cae::log_info("  C %-8g gamma %-8s cv accuracy %.4f%s", s.C[c], s.gamma[g].c_str(),
                        s.cv_accuracy[c * s.gamma.size() + g],
                        static_cast<int>(c) == s.best_C && static_cast<int>(g) == s.best_gamma ? "  <- best" : "");
      cae::log_info("best: C %g, gamma %s, cv accuracy %.4f (%d-fold, %.1f s); refitting on all %lld rows",
                    s.C[s.best_C], s.gamma[s.best_gamma].c_str(), s.best_accuracy(), s.folds, s.seconds,
                    static_cast<long long>(rows));
    }
    params.C = selection.C[selection.best_C];
    params.gamma = selection.gamma[selection.best_gamma];
  }
  // The sigmoids of the chosen (C, gamma), on cross-validated decision values; before the
  // fit, which scales the rows in place.
  svm::Sigmoids sigmoids;
  if (opt.probability) {
    cae::log_info("probabilities: %d-fold cross-validated decision values (seed %lld) for the pairs' sigmoids",
                  kProbabilityFolds, static_cast<long long>(opt.cv_seed));
    cae::ProgressBar prob_bar("svm-fit probability", kProbabilityFolds, "folds");
    sigmoids = svm::fit_sigmoids(train.X.data(), train.labels.data(), rows, D, params, kProbabilityFolds,
                                 static_cast<uint64_t>(opt.cv_seed), device, views,
                                 [&](int done, int) { prob_bar.update(done); });
    prob_bar.finish();
  }
  clf.fit(train.X.data(), train.labels.data(), rows, D, params, device, progress);
  bar->finish();
  if (!lead) {  // its pairs are with rank 0, which writes the model
    group.finish();
    return;
  }
  if (!selection.empty()) clf.set_model_selection(std::move(selection));
  if (opt.probability) clf.set_probability(sigmoids.A, sigmoids.B, sigmoids.folds, sigmoids.seed);
  clf.set_class_names(reader.class_names());
  clf.set_augment(opt.augment);
  clf.set_encoder_sha256(reader.encoder_sha256());  // svm-eval and classify check theirs against it
  const svm::Model& model = clf.model();
  const int kept = clf.n_features_kept();

  const std::vector<cae::InputFile> inputs = hashes.get();
  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), common.output);
    clf.save(w);
    cae::write_provenance(w, {"svm-model", 1, cae::options_json(), inputs});

    w.close();
  }
  if (libsvm_out) clf.export_libsvm(*libsvm_out);
  out->commit();
  if (libsvm_out) libsvm_out->commit();
  group.finish();
  phase.reset();

  const double total_s = clock.seconds();
  cae::log_info("wrote %s: %lld support vectors (%s), fit %.1f s, total %.1f s (read %.1f s)", common.output.c_str(),
                static_cast<long long>(model.n_sv()),
                [&] {
                  std::string s;
                  for (size_t c = 0; c < model.n_support.size(); ++c) s += (c ? " " : "") + std::to_string(model.n_support[c]);
                  return s;
                }().c_str(),
                clf.fit_seconds(), total_s, read_s);
  std::vector<double> n_support(model.n_support.begin(), model.n_support.end());
  cae::JsonObject json;
  json.add("tool", kInfo.name)
      .add("output", common.output)
      .add("n_train", rows)
      .add("n_images", n)
      .add("augment", opt.augment)
      .add("n_features", D)
      .add("n_features_kept", kept)
      .add("gamma", clf.resolved_gamma())
      .add("C", clf.file().C)
      .add("gamma_spec", clf.file().gamma_spec)
      .add("n_sv", model.n_sv())
      .add("n_support", n_support)
      .add("fit_seconds", clf.fit_seconds())
      .add("seconds", total_s)
      .add_raw("phases", cae::phases_json())
      .add("device", cae::device_name(device));
  const svm::ModelSelection& sel = clf.model_selection();
  json.add("probability", opt.probability);
  if (opt.probability) json.add("probability_seconds", sigmoids.seconds);
  if (!sel.empty())
    json.add("cv_accuracy", sel.best_accuracy())
        .add("cv_folds", static_cast<int64_t>(sel.folds))
        .add("cv_seconds", sel.seconds)
        .add("best_C", sel.C[sel.best_C])
        .add("best_gamma", sel.gamma[sel.best_gamma]);
  cae::emit_json(common, json.str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(
      argc, argv, kInfo, common,
      [&](CLI::App& app) {
        app.add_option("--features", opt.features, "Encoder features file (ae-features); uses /train")->required();
        app.add_option("--kernel", opt.kernel, "Kernel")->check(CLI::IsMember({"rbf", "linear"}));
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
        app.add_option("--augment", opt.augment,
                       "flip: also train on the mirrored images' features (/train/features_flip, ae-encode --flip); "
                       "with --cv an image and its mirror share a fold")
            ->check(CLI::IsMember({"none", "flip"}));
        app.add_flag("--probability", opt.probability,
                     "Also fit probability estimates (libsvm's -b 1: per-pair sigmoids on 5-fold cross-validated "
                     "decision values, seeded by --cv-seed); svm-eval then writes /probabilities and the log-loss");
        app.add_option("--scale", opt.scale, "Feature standardisation (mean/std of the training rows)")
            ->check(CLI::IsMember({"standard", "none"}));
        app.add_option("--tol", opt.tol, "Stopping tolerance on the KKT gap (libsvm -e)");
        app.add_option("--cache-mb", opt.cache_mb, "Memory for kernel values, MB")->check(CLI::PositiveNumber);
        cae::default_means(app.add_option("--train-limit", opt.train_limit,
                                          "Use the first N training rows (0 = all; more than there are = all, with "
                                          "a warning)")
                               ->check(CLI::NonNegativeNumber),
                           "all");
        cae::default_means(app.add_option("--threads", opt.threads, "CPU threads")->check(CLI::NonNegativeNumber),
                           "OMP_NUM_THREADS, else all cores; with --ranks N, the cores / N each");
        cae::output_file(app.add_option("--export-libsvm", opt.export_libsvm,
                                        "Also write the model in libsvm's text format (for svm-predict on scaled data)"));
        cae::add_group_options(app, opt.group,
                               "fits its share of the class pairs, of the cross-validation's (fold, gamma) cells and "
                               "of the probability folds");
      },
      [&] { fit(opt, common); });
}
