#include "kernels/svm/fit_request.h"

#include <omp.h>

#include <cmath>
#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/hdf5_io.h"
#include "common/log.h"
#include "common/memory_limit.h"
#include "common/phases.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/svm/libsvm_format.h"
#include "kernels/svm/resume.h"
#include "kernels/svm/train.h"

namespace svm {

namespace {

// libsvm's -b 1 draws 5 folds for its sigmoids; so do we (probability.h).
constexpr int kProbabilityFolds = 5;

// X from X16 (exact), on every core; X16 is freed. The float32 copy is twice the halves read
// from `file`, beside them for a moment: checked as the reader checks what it allocates.
void widen(FitRows& r, const std::string& file) {
  cae::require_memory(file, "the training rows widened to float32 beside their float16 values",
                      cae::saturating_product(r.X16.size(), sizeof(float) + sizeof(cae::Half)));
  r.X.resize(r.X16.size());
  cae::halves_to_floats(r.X16.data(), r.X.data(), r.X16.size());
  cae::LargeVector<cae::Half>().swap(r.X16);
}

}  // namespace

std::string run_fit(FitRequest req) {
  // Hashed from the first moment: a large features file's SHA-256 takes longer than its
  // reading and the fit (docs/DECISIONS.md, "Hashes start first and read ahead").
  cae::BackgroundHashes hashes({req.features});
  TrainPlan plan = plan_from_options(req.C, req.gamma, req.kernel, req.cv, req.tol);
  plan.views = cae::ViewSet::parse(req.augment);
  plan.probability_folds = req.probability ? kProbabilityFolds : 0;
  plan_kind(plan, req.kind, req.nu_given ? std::optional<double>(req.nu) : std::nullopt,
                 req.class_weight);
  if (req.approx_seed_given && req.approx_seed < 0) throw cae::UsageError("--approx-seed must be >= 0");
  plan_approx(plan, req.approx,
              req.approx_seed_given ? std::optional<uint64_t>(static_cast<uint64_t>(req.approx_seed)) : std::nullopt);
  const ApproxSpec& approx = plan.params.approx;
  if (approx.enabled()) {
    // One process on either device (issue 63's groups are not written); no libsvm text to write.
    check_nystroem_fit(plan.params.kind, plan.params.kernel, req.group.launch > 0);
    if (!req.export_libsvm.empty())
      throw cae::UsageError("--export-libsvm: a nystroem model (--approx) is not a libsvm model");
    const cae::MemoryHeadroom room = cae::memory_headroom();
    const uint64_t need = nystroem_peak_bytes(approx.landmarks);
    if (need > room.bytes)
      throw cae::UsageError(cae::strprintf(
          "--approx nystroem:%lld needs %.1f GiB for the landmarks' kernel matrix and its eigendecomposition "
          "(3 M^2 doubles), more than %s (%.1f GiB)", static_cast<long long>(approx.landmarks),
          static_cast<double>(need) / (1 << 30), room.limit.c_str(), static_cast<double>(room.bytes) / (1 << 30)));
  }
  // The CUDA driver is asked from here on, beside the read (common/device.h).
  const cae::DeviceChoice choice(req.device);
  plan.cv_scoring = cv_scoring_option(req.cv_scoring, plan.cv_folds);
  if (req.group.launch > 0) {
    cae::launch_group_checked(req.group, choice.get() == cae::Device::gpu, req.output, /*share_cores=*/true);
    return "";
  }
  // A rank of a group: its share of the pairs, cells and folds; rank 0 alone logs and writes.
  // A fit with folds catches SIGUSR1/SIGTERM (FitPreemption): a rank holds them until then.
  cae::GroupRank me(req.group, req.output, /*stop_signals=*/plan.cv_folds != 0 || req.probability);
  const cae::GroupPlace& place = me.place;
  if (approx.enabled() && place.grouped())
    throw cae::UsageError("--approx nystroem fits in one process, not as a rank of a group of " +
                          std::to_string(place.world));
  cae::GroupExchange& group = me.exchange;
  // The GPU's context and cuBLAS are made while the inputs are read: GPU 0's, or a rank's own.
  cae::cublas::preload(choice, place);
  set_cpu_threads(req.threads);
  cae::Stopwatch clock;
  // Output paths are checked now, not after the fit (rank 0 writes them; the others nothing).
  std::unique_ptr<cae::AtomicOutput> out, libsvm_out;
  if (group.lead()) out = std::make_unique<cae::AtomicOutput>(req.output);
  if (group.lead() && !req.export_libsvm.empty()) libsvm_out = std::make_unique<cae::AtomicOutput>(req.export_libsvm);
  // Everything the cross-validations' results depend on (not --threads, --cache-mb, --ranks).
  auto settings = [&](cae::Device device) {
    return cae::strprintf(
        "kernel %s, C %s, gamma %s, cv %lld, cv-seed %lld, augment %s, probability %d, class-weight %s, scale %s, "
        "tol %.17g, train-limit %lld, device %s", req.kernel.c_str(), req.C.c_str(), req.gamma.c_str(),
        static_cast<long long>(req.cv), static_cast<long long>(req.cv_seed), plan.views.spec().c_str(),
        req.probability, req.class_weight.c_str(), req.scale.c_str(), req.tol, static_cast<long long>(req.train_limit),
        cae::device_name(device)) +
        // Only a Nyström fit's: the exact fits' fingerprints stay those of earlier resume files.
        (approx.enabled() ? cae::strprintf(", approx nystroem:%lld, approx-seed %llu",
                                           static_cast<long long>(approx.landmarks),
                                           static_cast<unsigned long long>(approx.seed))
                          : std::string());
  };
  // A fit with folds (--cv, --probability) catches SIGUSR1/SIGTERM from before its read and
  // fingerprints its settings, the device among them, for --resume: it asks the driver first.
  // A single fit has nothing to resume and asks it beside the read.
  const bool has_units = plan.cv_folds != 0 || req.probability;
  std::optional<FitPreemption> preemption;
  auto watch_preemption = [&](cae::Device device) {
    preemption.emplace(req.output, fit_fingerprint(req.features, settings(device)), req.resume, group.lead(),
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
  FitRows rows = req.read_rows(plan.views, single_fit && choice.may_use_gpu());
  FitRows& train = rows;
  const int64_t n = rows.n;
  const int D = train.dim;
  const std::vector<std::string>& names = rows.class_names;
  const int32_t* y = train.labels.data();
  check_training_labels(plan, y, n, names, req.features);  // per image
  if (approx.landmarks > train.rows)
    throw cae::UsageError(req.features + ": --approx nystroem:" + std::to_string(approx.landmarks) +
                          " needs at most the " + std::to_string(train.rows) + " training rows as landmarks");
  const double read_s = clock.seconds();
  ClassifierParams& params = plan.params;
  params.standardize = req.scale == "standard";
  params.data_name = req.features;
  const bool halves = !train.X16.empty();
  std::optional<Scaler> scaler;
  if (single_fit) {
    phase.emplace(cae::Phase::compute);
    scaler = halves ? scaler_for(train.X16.data(), train.rows, D, params)
                    : scaler_for(train.X.data(), train.rows, D, params);
  }
  phase.emplace(cae::Phase::startup);  // what is left of the driver's answer
  const cae::Device device = choice.get();
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(omp_get_max_threads()));
  if (!preemption) watch_preemption(device);
  phase.emplace(cae::Phase::compute);

  params.class_weight = resolve_class_weights(req.class_weight, y, n, names);  // per image
  params.class_weight_spec = req.class_weight;
  const uint64_t rows_bytes = static_cast<uint64_t>(train.rows) * static_cast<uint64_t>(D) * sizeof(float);
  params.cache_mb =
      req.cache_mb ? req.cache_mb : default_cache_mb(cae::usable_memory_bytes(), rows_bytes, place.world);
  params.gpu_cache_mb = req.cache_mb;
  cae::record_effective("cache-mb", device == cae::Device::gpu && !req.cache_mb ? std::string("free device memory")
                                                                               : std::to_string(params.cache_mb));
  params.group = place.grouped() ? &group : nullptr;
  plan.seed = static_cast<uint64_t>(req.cv_seed);
  if (place.grouped())
    cae::log_info("a group of %d ranks (%s): each fits its share of the class pairs%s; rank 0 writes %s", place.world,
                  place.source.c_str(), plan.cv_folds ? ", cross-validation cells" : "", req.output.c_str());
  // The rest of the preparation on the GPU for a GPU fit: the raw rows go up and stay there
  // for the solver (docs/DECISIONS.md, "svm-fit fits its scaler while the driver starts; …").
  // float16 rows go up as they are and are widened there; elsewhere they are widened here.
  std::optional<PreparedSet> prepared;
  if (halves) prepared = PreparedSet::on_gpu(train.X16.data(), y, train.rows, D, params, *scaler, device);
  if (halves && !prepared) widen(train, req.features);  // the CPU's fit, or a GPU without the room for them
  if (single_fit && !prepared) prepared.emplace(train.X.data(), y, train.rows, D, params, std::move(*scaler), device);
  TrainReporter reporter(plan, y, n, D, place.world, device);
  Trained trained =
      svm::train(train.X.data(), y, train.rows, D, plan, device, reporter.progress(), prepared ? &*prepared : nullptr);
  reporter.finish();
  if (trained.interrupted) {
    group.finish();
    preemption->stop(static_cast<int>(plan.gamma.size()) * plan.cv_folds, plan.probability_folds);
  }
  if (!group.lead()) {  // its pairs are with rank 0, which writes the model
    group.finish();
    return "";
  }
  Classifier& clf = trained.classifier;
  clf.set_class_names(names);
  clf.set_augment(plan.views.spec());
  clf.set_encoder_sha256(rows.encoder_sha256);  // svm-eval and classify check theirs against it
  if (train.float16) clf.keep_float16();  // its support vectors as float16, as the features were

  phase.emplace(cae::Phase::write);
  {
    cae::Hdf5Writer w(out->temp_path(), req.output);
    // The model first: its support vectors (1.26 GB for CIFAR-10's) go to the file while the
    // features' hash, which only the provenance needs, finishes.
    clf.save(w);
    cae::write_provenance(w, {"svm-model", 1, cae::options_json(), hashes.get()});
    w.close();
  }
  if (libsvm_out) save_libsvm_model(*libsvm_out, clf.file());
  out->commit();
  if (libsvm_out) libsvm_out->commit();
  preemption->finished();
  group.finish();
  phase.reset();

  const FitSummary summary{req.output, plan.views.spec(), n, read_s, clock.seconds(), device,
                                trained.probability_seconds};
  return report_fit(clf, summary);
}

}  // namespace svm
