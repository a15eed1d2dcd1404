// svm-fit: train a one-vs-one RBF (or linear) C-SVM on encoder features, libsvm's way.
#include <omp.h>

#include <cmath>
#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/libsvm_format.h"
#include "kernels/svm/resume.h"
#include "kernels/svm/train.h"

namespace {

const cae::ToolInfo kInfo{"svm-fit", "train a one-vs-one C-SVM (libsvm formulation) on encoder features",
                          "svm-fit --features data/features.h5 --C 10 --gamma scale -o data/svm.h5\n"
                          "  svm-fit --features data/features.h5 --cv 5 --C 1,10,100 --gamma 0.5x,scale,2x -o data/svm.h5\n"
                          "  svm-fit --features data/features.h5 --augment flip,shift:2 --probability -o data/svm.h5",
                          true, true, "try --train-limit or a smaller --cache-mb, or --device cpu"};

struct Options {
  std::string features, kernel = "rbf", C = "10", gamma = "scale", scale = "standard", augment = "none";
  std::string export_libsvm, class_weight = "none", kind = "c-svc", cv_scoring = "accuracy";
  double tol = 1e-3, nu = 0.5;
  const CLI::Option* nu_option = nullptr;  // whether --nu was given: c-svc refuses it (svm::plan_kind)
  int64_t cache_mb = 0, train_limit = 0, cv = 0, cv_seed = 1;
  int threads = 0;
  bool probability = false, resume = false;
  cae::GroupOptions group;
};

// libsvm's -b 1 draws 5 folds for its sigmoids; so do we (probability.h).
constexpr int kProbabilityFolds = 5;

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
  cae::default_means(app.add_option("--cache-mb", opt.cache_mb, "Host memory for the CPU's kernel values, MB: a class "
                                    "pair's whole matrix where it fits, else the working-set solver's cached kernel "
                                    "rows, at least its 1,024 rows of the pair (the GPU keeps its kernel values in "
                                    "its own memory, as much as is free)")
                         ->check(CLI::PositiveNumber),
                     "half the memory left after the training rows, shared by a group's ranks");
  cae::default_means(app.add_option("--train-limit", opt.train_limit,
                                    "Use the first N training rows (0 = all; more than there are = all, with "
                                    "a warning)")
                         ->check(CLI::NonNegativeNumber),
                     "all");
  cae::add_threads_option(app, opt.threads);
  cae::output_file(app.add_option("--export-libsvm", opt.export_libsvm,
                                  "Also write the model in libsvm's text format (for svm-predict on scaled data)"));
  cae::add_group_options(app, opt.group,
                         "fits its share of the class pairs, of the cross-validation's (fold, gamma) cells and "
                         "of the probability folds");
}

void fit(const Options& opt, const cae::CommonOptions& common) {
  // Hashed from the first moment: 2 GB of features take ~1.8 s at SHA-256's ~1.1 GB/s, longer
  // than the reading and the fit (docs/BENCHMARKS.md).
  cae::BackgroundHashes hashes({opt.features});
  svm::TrainPlan plan = svm::plan_from_options(opt.C, opt.gamma, opt.kernel, opt.cv, opt.tol);
  plan.views = cae::ViewSet::parse(opt.augment);
  // The CUDA driver is asked from here on, beside the read (common/device.h).
  const cae::DeviceChoice choice(common.device);
  plan.probability_folds = opt.probability ? kProbabilityFolds : 0;
  svm::plan_kind(plan, opt.kind, opt.nu_option->count() ? std::optional<double>(opt.nu) : std::nullopt,
                 opt.class_weight);
  plan.cv_scoring = svm::cv_scoring_option(opt.cv_scoring, plan.cv_folds);
  if (opt.group.launch > 0) {
    cae::launch_group_checked(opt.group, choice.get() == cae::Device::gpu, common.output, /*share_cores=*/true);
    return;
  }
  // A rank of a group: its share of the pairs, cells and folds; rank 0 alone logs and writes.
  // A fit with folds catches SIGUSR1/SIGTERM (FitPreemption): a rank holds them until then.
  cae::GroupRank me(opt.group, common.output, /*stop_signals=*/plan.cv_folds != 0 || opt.probability);
  const cae::GroupPlace& place = me.place;
  cae::GroupExchange& group = me.exchange;
  // The GPU's context and cuBLAS are made while the inputs are read: GPU 0's, or a rank's own.
  cae::cublas::preload(choice, place);
  svm::set_cpu_threads(opt.threads);
  cae::Stopwatch clock;
  // Output paths are checked now, not after the fit (rank 0 writes them; the others nothing).
  std::unique_ptr<cae::AtomicOutput> out, libsvm_out;
  if (group.lead()) out = std::make_unique<cae::AtomicOutput>(common.output);
  if (group.lead() && !opt.export_libsvm.empty()) libsvm_out = std::make_unique<cae::AtomicOutput>(opt.export_libsvm);
  // Everything the cross-validations' results depend on (not --threads, --cache-mb, --ranks).
  auto settings = [&](cae::Device device) {
    return cae::strprintf(
        "kernel %s, C %s, gamma %s, cv %lld, cv-seed %lld, augment %s, probability %d, class-weight %s, scale %s, "
        "tol %.17g, train-limit %lld, device %s", opt.kernel.c_str(), opt.C.c_str(), opt.gamma.c_str(),
        static_cast<long long>(opt.cv), static_cast<long long>(opt.cv_seed), plan.views.spec().c_str(),
        opt.probability, opt.class_weight.c_str(), opt.scale.c_str(), opt.tol, static_cast<long long>(opt.train_limit),
        cae::device_name(device));
  };
  // A fit with folds (--cv, --probability) catches SIGUSR1/SIGTERM from before its read and
  // fingerprints its settings, the device among them, for --resume: it asks the driver first.
  // A single fit has nothing to resume and asks it beside the read.
  const bool has_units = plan.cv_folds != 0 || opt.probability;
  std::optional<svm::FitPreemption> preemption;
  auto watch_preemption = [&](cae::Device device) {
    preemption.emplace(common.output, svm::fit_fingerprint(opt.features, settings(device)), opt.resume, group.lead(),
                       has_units);
    plan.units = preemption->units();
  };
  if (has_units) watch_preemption(choice.get());

  // A single fit prepares its rows once (PreparedSet); its scaler (two passes over the rows)
  // is fitted while the CUDA driver starts and the GPU's context is made, which a GPU fit
  // waits for anyway. Folds prepare their own.
  const bool single_fit = plan.cv_folds == 0 && plan.probability_folds == 0;
  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  // With --augment the n images' V views in one [V·n, D] buffer (scaled in place: one copy).
  // A single fit that may run on the GPU keeps float16 rows as they are stored: a GPU fit
  // uploads them so (0.82 GB for CIFAR-10's, not 1.64) and widens them there; a CPU fit
  // widens them here.
  ae::FeatureRows rows =
      ae::read_training_rows(opt.features, opt.train_limit, plan.views, single_fit && choice.may_use_gpu());
  ae::FeatureSplit& train = rows.split;
  const int64_t n = rows.n;
  const int D = train.dim;
  const std::vector<std::string>& names = rows.class_names;
  const int32_t* y = train.labels.data();
  svm::check_training_labels(plan, y, n, names, opt.features);  // per image
  const double read_s = clock.seconds();
  svm::ClassifierParams& params = plan.params;
  params.standardize = opt.scale == "standard";
  params.data_name = opt.features;
  const bool halves = !train.X16.empty();
  std::optional<svm::Scaler> scaler;
  if (single_fit) {
    phase.emplace(cae::Phase::compute);
    scaler = halves ? svm::scaler_for(train.X16.data(), train.n, D, params)
                    : svm::scaler_for(train.X.data(), train.n, D, params);
  }
  phase.emplace(cae::Phase::startup);  // what is left of the driver's answer
  const cae::Device device = choice.get();
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  if (!preemption) watch_preemption(device);
  phase.emplace(cae::Phase::compute);

  params.class_weight = svm::resolve_class_weights(opt.class_weight, y, n, names);  // per image
  params.class_weight_spec = opt.class_weight;
  const uint64_t rows_bytes = static_cast<uint64_t>(train.n) * static_cast<uint64_t>(D) * sizeof(float);
  params.cache_mb =
      opt.cache_mb ? opt.cache_mb : svm::default_cache_mb(cae::usable_memory_bytes(), rows_bytes, place.world);
  cae::record_effective("cache-mb", std::to_string(params.cache_mb));
  params.group = place.grouped() ? &group : nullptr;
  plan.seed = static_cast<uint64_t>(opt.cv_seed);
  if (place.grouped())
    cae::log_info("a group of %d ranks (%s): each fits its share of the class pairs%s; rank 0 writes %s", place.world,
                  place.source.c_str(), plan.cv_folds ? ", cross-validation cells" : "", common.output.c_str());
  // The rest of the preparation on the GPU for a GPU fit: the raw rows go up and stay there
  // for the solver (the host's other two passes took 0.15-0.2 s, the GPU's take milliseconds).
  // float16 rows go up as they are and are widened there; elsewhere they are widened here.
  std::optional<svm::PreparedSet> prepared;
  if (halves) prepared = svm::PreparedSet::on_gpu(train.X16.data(), y, train.n, D, params, *scaler, device);
  if (halves && !prepared) train.widen();  // the CPU's fit, or a GPU without the room for them
  if (single_fit && !prepared) prepared.emplace(train.X.data(), y, train.n, D, params, std::move(*scaler), device);
  svm::TrainReporter reporter(plan, y, n, D, place.world, device);
  svm::Trained trained =
      svm::train(train.X.data(), y, train.n, D, plan, device, reporter.progress(), prepared ? &*prepared : nullptr);
  reporter.finish();
  if (trained.interrupted) {
    group.finish();
    preemption->stop(static_cast<int>(plan.gamma.size()) * plan.cv_folds, plan.probability_folds);
  }
  if (!group.lead()) {  // its pairs are with rank 0, which writes the model
    group.finish();
    return;
  }
  svm::Classifier& clf = trained.classifier;
  clf.set_class_names(names);
  clf.set_augment(plan.views.spec());
  clf.set_encoder_sha256(rows.encoder_sha256);  // svm-eval and classify check theirs against it
  if (train.float16) clf.keep_float16();  // its support vectors as float16, as the features were

  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), common.output);
    // The model first: its support vectors (1.26 GB for CIFAR-10's) go to the file while the
    // features' hash, which only the provenance needs, finishes.
    clf.save(w);
    cae::write_provenance(w, {"svm-model", 1, cae::options_json(), hashes.get()});
    w.close();
  }
  if (libsvm_out) svm::save_libsvm_model(*libsvm_out, clf.file());
  out->commit();
  if (libsvm_out) libsvm_out->commit();
  preemption->finished();
  group.finish();
  phase.reset();

  const svm::FitSummary summary{common.output, plan.views.spec(), n, read_s, clock.seconds(), device,
                                trained.probability_seconds};
  cae::emit_json(common, svm::report_fit(clf, summary));
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, fit); }
