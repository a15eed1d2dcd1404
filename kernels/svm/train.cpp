#include "kernels/svm/train.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

#include "common/class_names.h"
#include "common/error.h"
#include "common/group.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "kernels/svm/group_fit.h"

namespace svm {

TrainPlan plan_from_options(const std::string& C, const std::string& gamma, const std::string& kernel, int64_t cv,
                            double tol) {
  TrainPlan plan;
  plan.C = parse_C_list(C);
  plan.gamma = parse_gamma_list(gamma);
  if (!(tol > 0) || !std::isfinite(tol)) throw cae::UsageError("--tol must be > 0");
  if ((plan.C.size() > 1 || plan.gamma.size() > 1) && cv == 0)
    throw cae::UsageError("--C and --gamma take more than one value only with --cv K (cross-validation picks the pair)");
  if (plan.gamma.size() > 1 && kernel == "linear") throw cae::UsageError("--kernel linear has no gamma to search");
  if (kernel == "linear" && gamma != "scale")  // "scale" is the default: not given
    throw cae::UsageError("--gamma " + gamma + " has no effect with --kernel linear (leave it out)");
  // More folds than rows is refused once the rows are read (check_cv_folds); the clamp only
  // keeps the number an int until then.
  plan.cv_folds = static_cast<int>(std::min<int64_t>(cv, 1 << 30));
  if (plan.cv_folds != 0) check_cv_folds(plan.cv_folds, nullptr, 0, {});
  plan.params.kernel = kernel == "linear" ? KernelType::linear : KernelType::rbf;
  plan.params.tol = tol;
  return plan;
}

void plan_kind(TrainPlan& plan, const std::string& kind, std::optional<double> given_nu,
               const std::string& class_weight) {
  plan.params.kind = parse_kind(kind);
  if (plan.params.kind != SvmKind::one_class) {
    if (given_nu) throw cae::UsageError("--nu is for --kind one-class");
    return;
  }
  const double nu = given_nu.value_or(0.5);
  if (!(nu > 0 && nu <= 1)) throw cae::UsageError("--nu must be in (0, 1], not " + cae::strprintf("%g", nu));
  const char* refused = plan.cv_folds != 0             ? "--cv"
                        : plan.probability_folds != 0  ? "--probability"
                        : class_weight != "none"       ? "--class-weight"
                        : plan.C.size() > 1            ? "a --C list"
                                                       : nullptr;
  if (refused) throw cae::UsageError(std::string("--kind one-class does not take ") + refused);
  plan.params.nu = nu;
}

void plan_approx(TrainPlan& plan, const std::string& approx, std::optional<uint64_t> seed) {
  if (approx.empty()) {
    if (seed) throw cae::UsageError("--approx-seed is for --approx nystroem:M");
    return;
  }
  ApproxSpec spec = parse_approx_spec(approx);
  spec.seed = seed.value_or(1);
  check_nystroem_fit(plan.params.kind, plan.params.kernel, /*group=*/false);
  plan.params.approx = spec;
}

Trained train(float* X, const int32_t* y, int64_t n, int dim, const TrainPlan& plan, cae::Device device,
              const TrainProgress& progress, const PreparedSet* prepared) {
  if (plan.C.empty() || plan.gamma.empty()) throw std::invalid_argument("train: empty C or gamma list");
  if (prepared && (plan.cv_folds != 0 || plan.probability_folds != 0))
    throw std::invalid_argument("train: rows prepared once serve a single fit, not folds");
  if (plan.cv_folds == 0 && (plan.C.size() > 1 || plan.gamma.size() > 1))
    throw std::invalid_argument("train: several C or gamma values need cross-validation to choose");
  ClassifierParams params = plan.params;
  if (params.kind == SvmKind::one_class && params.group)
    throw cae::UsageError("--kind one-class fits in one process (no --ranks)");
  params.C = plan.C.front();
  params.gamma = plan.gamma.front();
  ModelSelection selection;
  Trained out;
  if (plan.cv_folds != 0) {
    selection = cross_validate(X, y, n, dim, params, plan.C, plan.gamma, plan.cv_folds, plan.seed, device, progress.cv,
                               plan.views.count(), plan.units ? &plan.units->cv : nullptr, plan.cv_scoring);
    out.interrupted = plan.units && plan.units->cv.stopped;
    if (out.interrupted) return out;
    if (progress.selected) progress.selected(selection);
    params.C = selection.C[selection.best_C];
    params.gamma = selection.gamma[selection.best_gamma];
  }
  // The sigmoids of the chosen (C, gamma), on cross-validated decision values.
  Sigmoids sigmoids;
  if (plan.probability_folds != 0) {
    if (plan.units)  // a resume whose grid chose another pair (another --cv-scoring) redoes them
      plan.units->probability.compute_for(cae::strprintf("C %.17g, gamma %s", params.C, params.gamma.c_str()));
    sigmoids = fit_sigmoids(X, y, n, dim, params, plan.probability_folds, plan.seed, device, plan.views.count(),
                            progress.probability, plan.units ? &plan.units->probability : nullptr);
    out.interrupted = plan.units && plan.units->probability.stopped;
    if (out.interrupted) return out;
  }
  if (prepared)
    out.classifier = prepared->fit(params, device, progress.fit);
  else
    out.classifier.fit(X, y, n, dim, params, device, progress.fit);
  out.probability_seconds = sigmoids.seconds;
  if (!selection.empty()) out.classifier.set_model_selection(std::move(selection));
  // A group's other ranks have no sigmoids (rank 0 fits them) and write no model.
  const bool lead = !params.group || params.group->lead();
  if (plan.probability_folds != 0 && lead)
    out.classifier.set_probability(sigmoids.A, sigmoids.B, sigmoids.folds, sigmoids.seed);
  return out;
}

void check_training_classes(const int32_t* y, int64_t n, const std::vector<std::string>& class_names,
                            const std::string& data_name) {
  const std::set<int32_t> distinct(y, y + n);
  if (distinct.size() < 2)
    cae::fail_file(data_name, "the " + std::to_string(n) + " training rows hold a single class (" +
                                  (distinct.empty() ? std::string("none") : std::to_string(*distinct.begin())) +
                                  "); an SVM needs at least two");
  if (distinct.size() < class_names.size()) {  // e.g. --train-limit 5: said, not refused
    std::string missing;
    for (size_t c = 0; c < class_names.size(); ++c)
      if (!distinct.count(static_cast<int32_t>(c))) missing += (missing.empty() ? "" : ", ") + class_names[c];
    cae::log_warn("the %lld training rows hold %zu of the %zu classes (missing: %s); the model can never predict those",
                  static_cast<long long>(n), distinct.size(), class_names.size(), missing.c_str());
  }
}

void check_training_labels(const TrainPlan& plan, const int32_t* y, int64_t n,
                           const std::vector<std::string>& class_names, const std::string& data_name) {
  if (plan.params.kind == SvmKind::c_svc) check_training_classes(y, n, class_names, data_name);
  if (plan.cv_folds != 0) check_cv_folds(plan.cv_folds, y, n, class_names);
  if (plan.probability_folds != 0) check_sigmoid_data(y, n, data_name);
}

int64_t default_cache_mb(uint64_t usable_bytes, uint64_t rows_bytes, int ranks) {
  const uint64_t left = usable_bytes > rows_bytes ? usable_bytes - rows_bytes : 0;
  const uint64_t mb = left / 2 / static_cast<uint64_t>(std::max(ranks, 1)) >> 20;
  return static_cast<int64_t>(std::clamp<uint64_t>(mb, 64, uint64_t{1} << 40));  // no limit known: UINT64_MAX
}

ClassWeights resolve_class_weights(const std::string& spec, const int32_t* y, int64_t n,
                                   const std::vector<std::string>& class_names) {
  ClassWeights w;
  if (spec == "none") return w;
  if (spec == "balanced") {
    std::map<int32_t, int64_t> count;
    for (int64_t r = 0; r < n; ++r) ++count[y[r]];
    const double k = static_cast<double>(count.size());
    for (const auto& [label, c] : count) w[label] = static_cast<double>(n) / (k * static_cast<double>(c));
    return w;
  }
  auto bad = [&](const std::string& why) {
    throw cae::UsageError("--class-weight '" + spec + "': " + why +
                          " (expected none, balanced or NAME:W,NAME:W,... with W > 0)");
  };
  auto no_class = [&](const std::string& name) {
    std::string classes;  // the first few: a dataset may have 256
    const size_t shown = std::min<size_t>(class_names.size(), 12);
    for (size_t c = 0; c < shown; ++c) classes += (c ? ", " : "") + std::to_string(c) + " " + class_names[c];
    if (shown < class_names.size()) classes += ", ... (" + std::to_string(class_names.size()) + " classes)";
    throw cae::UsageError("--class-weight '" + spec + "': '" + name + "' is no class name or label of the data (classes: " +
                          classes + ")");
  };
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) bad("'" + item + "' is not NAME:W");
    const std::string name = item.substr(0, colon), value = item.substr(colon + 1);
    int32_t label = -1;
    // Class names are UTF-8 (common/class_names.h); a name typed in Latin-1 means the same class.
    const auto named = std::find(class_names.begin(), class_names.end(), cae::utf8_or_latin1(name));
    if (named != class_names.end()) {
      label = static_cast<int32_t>(named - class_names.begin());
    } else {
      char* end = nullptr;
      const long number = std::strtol(name.c_str(), &end, 10);
      if (name.empty() || *end != '\0' || number < 0 || static_cast<size_t>(number) >= class_names.size())
        no_class(name);
      label = static_cast<int32_t>(number);
    }
    char* end = nullptr;
    const double weight = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(weight > 0) || !std::isfinite(weight))
      bad("the weight of '" + name + "' is not a finite number > 0");
    if (!w.emplace(label, weight).second) bad("class '" + name + "' is named twice");
    start = comma + 1;
  }
  return w;
}

void log_model_selection(const ModelSelection& s, int64_t rows) {
  // ", macro_f1 0.7312": the number that chose the pair, unless it is the accuracy itself.
  // log_loss's score is the negated log-loss (larger is better); people read the log-loss.
  auto score_of = [&](size_t cell) {
    if (s.scoring == Scoring::accuracy) return std::string();
    if (s.scoring == Scoring::log_loss) return cae::strprintf(", log-loss %.4f", -s.cv_score[cell]);
    return cae::strprintf(", %s %.4f", scoring_name(s.scoring), s.cv_score[cell]);
  };
  for (size_t c = 0; c < s.C.size(); ++c)
    for (size_t g = 0; g < s.gamma.size(); ++g)
      cae::log_info("  C %-8g gamma %-8s cv accuracy %.4f%s%s", s.C[c], s.gamma[g].c_str(),
                    s.cv_accuracy[c * s.gamma.size() + g], score_of(c * s.gamma.size() + g).c_str(),
                    static_cast<int>(c) == s.best_C && static_cast<int>(g) == s.best_gamma ? "  <- best" : "");
  cae::log_info("best%s: C %g, gamma %s, cv accuracy %.4f%s (%d-fold, %.1f s); refitting on all %lld rows",
                s.scoring == Scoring::accuracy ? "" : cae::strprintf(" by %s", scoring_name(s.scoring)).c_str(),
                s.C[s.best_C], s.gamma[s.best_gamma].c_str(), s.best_accuracy(), score_of(s.best_cell()).c_str(),
                s.folds, s.seconds, static_cast<long long>(rows));
}

TrainReporter::TrainReporter(const TrainPlan& plan, const int32_t* y, int64_t images, int dim, int world,
                             cae::Device device)
    : seed_(plan.seed) {
  const int64_t rows = images * plan.views.count();
  const int probability_folds = plan.probability_folds;
  if (plan.cv_folds != 0) {
    const size_t cells = plan.C.size() * plan.gamma.size(), fits = cells * static_cast<size_t>(plan.cv_folds);
    cae::log_info("cross-validation: %d folds (seed %lld), %zu C x %zu gamma = %zu fits", plan.cv_folds,
                  static_cast<long long>(plan.seed), plan.C.size(), plan.gamma.size(), fits);
    cv_bar_ = std::make_unique<cae::ProgressBar>("svm-fit cv", static_cast<int64_t>(fits), "fits");
  }
  auto start_probability = [this, probability_folds] {
    cae::log_info("probabilities: %d-fold cross-validated decision values (seed %lld) for the pairs' sigmoids",
                  probability_folds, static_cast<long long>(seed_));
    probability_bar_ = std::make_unique<cae::ProgressBar>("svm-fit probability", probability_folds, "folds");
  };
  if (plan.cv_folds == 0 && probability_folds != 0) start_probability();
  progress_.cv = [this](int done, int) { cv_bar_->update(done); };
  progress_.selected = [this, rows, probability_folds, start_probability](const ModelSelection& s) {
    cv_bar_->finish();
    log_model_selection(s, rows);
    if (probability_folds != 0) start_probability();
  };
  progress_.probability = [this](int done, int) { probability_bar_->update(done); };
  const int k = static_cast<int>(std::set<int32_t>(y, y + images).size());
  const std::string views = plan.views.count() > 1 ? " (" + plan.views.rows_description() + ")" : "";
  const int64_t landmarks = plan.params.approx.landmarks;
  progress_.fit.ready = [this, rows, dim, k, world, views, device, landmarks](const Classifier& c) {
    if (probability_bar_) probability_bar_->finish();
    const bool one_class = c.model().kind == SvmKind::one_class;
    const std::string what =
        (one_class ? "one-class" : std::to_string(k) + " classes") +
        (landmarks ? cae::strprintf(", Nyström features of %lld landmarks", static_cast<long long>(landmarks)) : "");
    const std::string bound = one_class ? cae::strprintf("nu %g", c.file().nu) : cae::strprintf("C %g", c.file().C);
    cae::log_info("%lld training rows%s x %d features (%d constant, dropped), %s, gamma %.6g (%s), %s, %s",
                  static_cast<long long>(rows), views.c_str(), dim,
                  dim - c.n_features_kept(), what.c_str(), c.resolved_gamma(), c.file().gamma_spec.c_str(),
                  bound.c_str(), cae::device_name(device));
    fit_bar_.reset();
    if (one_class || landmarks) return;  // one solve: no pairs to count
    // A group's rank learns its share of the pairs from the deal, which the fit makes from the rows.
    if (world == 1) fit_bar_ = std::make_unique<cae::ProgressBar>("svm-fit", static_cast<int64_t>(k) * (k - 1) / 2, "pairs");
  };
  progress_.fit.pair = [this](int done, int total) {
    if (!fit_bar_) fit_bar_ = std::make_unique<cae::ProgressBar>("svm-fit", total, "pairs");
    fit_bar_->update(done);
  };
}

void TrainReporter::finish() {
  for (auto* bar : {&cv_bar_, &probability_bar_, &fit_bar_})
    if (*bar) (*bar)->finish();
}

std::string report_fit(const Classifier& clf, const FitSummary& s) {
  const Model& model = clf.model();
  std::string counts;
  for (size_t c = 0; c < model.n_support.size(); ++c) counts += (c ? " " : "") + std::to_string(model.n_support[c]);
  const NystroemModel& approx = clf.file().approx;
  if (clf.is_approx())
    cae::log_info("wrote %s: Nyström features of %lld landmarks (rank %d), fit %.1f s, total %.1f s (read %.1f s)",
                  s.output.c_str(), static_cast<long long>(approx.M), approx.rank, clf.fit_seconds(), s.seconds,
                  s.read_seconds);
  else
    cae::log_info("wrote %s: %lld support vectors (%s), fit %.1f s, total %.1f s (read %.1f s)", s.output.c_str(),
                  static_cast<long long>(model.n_sv()), counts.c_str(), clf.fit_seconds(), s.seconds, s.read_seconds);
  const std::vector<double> n_support(model.n_support.begin(), model.n_support.end());
  cae::JsonObject json;
  json.add("tool", "svm-fit")
      .add("output", s.output)
      .add("n_train", clf.file().n_train)
      .add("n_images", s.n_images)
      .add("augment", s.augment)
      .add("n_features", clf.n_features())
      .add("n_features_kept", clf.n_features_kept())
      .add("gamma", clf.resolved_gamma())
      .add("kind", classifier_kind_name(clf.file()))
      .add("C", clf.file().C)
      .add("gamma_spec", clf.file().gamma_spec)
      .add("class_weight", clf.file().class_weight_spec)
      .add("n_sv", model.n_sv())
      .add("n_support", n_support)
      .add("fit_seconds", clf.fit_seconds())
      .add("seconds", s.seconds)
      .add_raw("phases", cae::phases_json())
      .add("device", cae::device_name(s.device));
  if (model.kind == SvmKind::one_class) json.add("nu", clf.file().nu);
  if (clf.is_approx())
    json.add("landmarks", approx.M).add("rank", static_cast<int64_t>(approx.rank))
        .add("approx_seed", static_cast<int64_t>(approx.seed));
  json.add("probability", clf.has_probability());
  if (clf.has_probability()) json.add("probability_seconds", s.probability_seconds);
  const ModelSelection& sel = clf.model_selection();
  if (!sel.empty())
    json.add("cv_accuracy", sel.best_accuracy())
        .add("cv_scoring", scoring_name(sel.scoring))
        .add("cv_score", sel.best_score())
        .add("cv_folds", static_cast<int64_t>(sel.folds))
        .add("cv_seconds", sel.seconds)
        .add("best_C", sel.C[sel.best_C])
        .add("best_gamma", sel.gamma[sel.best_gamma]);
  return json.str();
}

}  // namespace svm
