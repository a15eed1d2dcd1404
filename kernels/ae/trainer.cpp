#include "kernels/ae/trainer.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>

#include "common/error.h"
#include "common/log.h"
#include "common/shuffle.h"
#include "common/timer.h"

namespace ae {

std::vector<int64_t> epoch_order(uint64_t seed, int epoch, int64_t n) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(epoch)};
  std::mt19937_64 rng(seq);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  cae::fisher_yates_shuffle(order, rng);
  return order;
}

SplitRows validation_rows(int64_t n, int64_t n_val) {
  if (n_val < 0 || n_val > n) throw std::invalid_argument("validation_rows: n_val must be in 0..n");
  // Epoch 0 of the fixed seed: the same Fisher–Yates shuffle as training, never used there
  // (training epochs count from 1).
  const std::vector<int64_t> order = epoch_order(kValidationSplitSeed, 0, n);
  std::vector<char> is_val(static_cast<size_t>(n), 0);
  for (int64_t i = n - n_val; i < n; ++i) is_val[order[i]] = 1;
  SplitRows rows;
  rows.train.reserve(static_cast<size_t>(n - n_val));
  rows.val.reserve(static_cast<size_t>(n_val));
  for (int64_t i = 0; i < n; ++i) (is_val[i] ? rows.val : rows.train).push_back(i);
  return rows;
}

cae::ImageSplit take_rows(const cae::ImageSplit& s, const std::vector<int64_t>& rows) {
  cae::ImageSplit out;
  out.C = s.C, out.H = s.H, out.W = s.W;
  const int64_t bytes = s.image_bytes();
  out.images.resize(rows.size() * static_cast<size_t>(bytes));
  out.labels.resize(rows.size());
  // On the threads that first touch the new pages (docs/DECISIONS.md, "Large buffers are left
  // uninitialised and mapped in huge pages"): one thread copying CIFAR-10's 45,000 training
  // images was a fixed cost of every GPU training run (docs/BENCHMARKS.md, "ae-train's fixed
  // costs, the closing line without Python, what bounds the rest").
  const int64_t count = int64_t(rows.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    memcpy(out.images.data() + i * bytes, s.image(rows[size_t(i)]), static_cast<size_t>(bytes));
    out.labels[size_t(i)] = s.labels[static_cast<size_t>(rows[size_t(i)])];
  }
  return out;
}

bool plateau_step(double monitored, float factor, int patience, Checkpoint& c) {
  if (monitored < c.plateau_best * (1.0 - 1e-4)) {
    c.plateau_best = monitored;
    c.plateau_bad_epochs = 0;
    return false;
  }
  if (++c.plateau_bad_epochs <= patience) return false;
  c.plateau_bad_epochs = 0;
  const double reduced = c.lr_current * factor;
  if (c.lr_current - reduced <= 1e-8) return false;
  c.lr_current = reduced;
  return true;
}

void pick_samples(const cae::ImageSplit& test, Checkpoint& c) {
  c.sample_images.clear();
  c.sample_labels.clear();
  std::vector<int64_t> first(256, -1);
  for (int64_t i = test.size() - 1; i >= 0; --i) first[test.labels[static_cast<size_t>(i)]] = i;
  for (int cls = 0; cls < 256; ++cls)
    if (first[cls] >= 0) {
      c.sample_labels.push_back(static_cast<uint8_t>(cls));
      c.sample_images.insert(c.sample_images.end(), test.image(first[cls]), test.image(first[cls]) + test.image_bytes());
    }
}

Trainer::Trainer(TrainerConfig config, AeBackend& backend, cae::ImageSplit train, cae::ImageSplit test,
                 std::string data_sha256)
    : cfg_(std::move(config)), backend_(backend), test_(std::move(test)), data_sha256_(std::move(data_sha256)) {
  const Architecture& arch = backend_.architecture();
  for (const cae::ImageSplit* s : {&train, &test_})
    if (s->C != arch.input_channels() || s->H != arch.height() || s->W != arch.width())
      throw std::invalid_argument("Trainer: images of " + std::to_string(s->C) + "x" + std::to_string(s->H) + "x" +
                                  std::to_string(s->W) + " for a model of " + arch.describe());
  if (cfg_.val_split < 0 || cfg_.val_split >= train.size())
    throw cae::UsageError("--val-split " + std::to_string(cfg_.val_split) + " leaves no training image (the data has " +
                          std::to_string(train.size()) + ")");
  if (cfg_.val_split == 0) {
    train_ = std::move(train);  // no hold-out: the file's order, no copy
    val_.C = train_.C, val_.H = train_.H, val_.W = train_.W;
  } else {
    const SplitRows rows = validation_rows(train.size(), cfg_.val_split);
    train_ = take_rows(train, rows.train);
    val_ = take_rows(train, rows.val);
  }
}

void Trainer::start() {
  ckpt_ = Checkpoint();
  ckpt_.arch = backend_.architecture();
  ckpt_.params = init_params(ckpt_.arch, cfg_.seed);
  backend_.set_params(ckpt_.params);
  ckpt_.optimizer_kind = cfg_.optimizer.kind;
  ckpt_.seed = cfg_.seed;
  ckpt_.batch_size = cfg_.batch_size;
  ckpt_.lr_current = cfg_.optimizer.lr;
  ckpt_.plateau_best = std::numeric_limits<double>::infinity();
  ckpt_.train_count = train_.size();
  ckpt_.val_count = val_.size();
  ckpt_.data_sha256 = data_sha256_;
  set_run_fields();
}

// --resume only continues a run with the same data and the options that shape its
// trajectory; anything else would silently produce a model nobody asked for.
void Trainer::check_resumable(const Checkpoint& c) const {
  const std::string& file = cfg_.output_name;
  auto mismatch = [&](const std::string& was, const std::string& now) {
    throw cae::UsageError(file + ": cannot --resume: it was trained with " + was + ", this run has " + now +
                          " (use the same data and options, or drop --resume to start over)");
  };
  auto num = [](const char* what, int64_t v) { return std::string(what) + " " + std::to_string(v); };
  if (c.arch != backend_.architecture())
    mismatch("the architecture " + c.arch.describe(), backend_.architecture().describe());
  if (c.data_sha256 != data_sha256_)
    mismatch("a dataset of sha256 " + c.data_sha256.substr(0, 12) + "…", "one of sha256 " + data_sha256_.substr(0, 12) + "…");
  if (c.val_count != val_.size()) mismatch(num("--val-split", c.val_count), num("--val-split", val_.size()));
  if (c.train_count != train_.size())
    mismatch(std::to_string(c.train_count) + " training images", std::to_string(train_.size()));
  if (c.seed != cfg_.seed) mismatch(num("--seed", int64_t(c.seed)), num("--seed", int64_t(cfg_.seed)));
  if (c.batch_size != cfg_.batch_size) mismatch(num("--batch-size", c.batch_size), num("--batch-size", cfg_.batch_size));
  if (c.optimizer_kind != cfg_.optimizer.kind)
    mismatch("--optimizer " + c.optimizer_kind, "--optimizer " + cfg_.optimizer.kind);
  if (c.device != cfg_.device)
    cae::log_warn("%s was trained with --device %s, this run uses --device %s", file.c_str(), c.device.c_str(),
                  cfg_.device.c_str());
  else if (cfg_.device == "cpu" && c.threads != cfg_.threads)
    cae::log_warn("%s was trained with %lld threads, this run uses %d: the result will not be bit-identical to an "
                  "uninterrupted run", file.c_str(), static_cast<long long>(c.threads), cfg_.threads);
}

void Trainer::resume(Checkpoint c) {
  check_resumable(c);
  ckpt_ = std::move(c);
  backend_.set_params(ckpt_.params);
  backend_.set_optimizer_state(ckpt_.optimizer);
  set_run_fields();
}

bool Trainer::finished() const {
  return ckpt_.epochs_done >= cfg_.epochs && !(ckpt_.epochs_done == 0 && cfg_.epochs == 0);
}

// What this run is, whether it starts or resumes: the target, the test split and the
// machine it runs on, and the sample images the checkpoint shows.
void Trainer::set_run_fields() {
  ckpt_.epochs_target = cfg_.epochs;
  ckpt_.test_count = test_.size();
  ckpt_.threads = cfg_.threads;
  ckpt_.device = cfg_.device;
  ckpt_.precision = cfg_.precision;
  pick_samples(test_, ckpt_);
  ckpt_.sample_reconstructions.clear();
}

void Trainer::reconstruct_samples() {
  ckpt_.sample_reconstructions.resize(ckpt_.sample_images.size());
  backend_.reconstruct(ckpt_.sample_images.data(), int64_t(ckpt_.sample_labels.size()),
                       ckpt_.sample_reconstructions.data());
}

void Trainer::take_backend_state() {
  ckpt_.params = backend_.params();
  ckpt_.optimizer = backend_.optimizer_state();
}

// Trains epoch `epoch` from ckpt_.epoch_images_done on, backend_.steps_per_call() steps per
// backend call, adding to the epoch's loss sum and time in ckpt_. Returns false when `stop` asked
// to stop before a call (the checkpoint then holds the position).
bool Trainer::train_rest_of_epoch(int epoch, const std::vector<int64_t>& order, const Progress& on_progress,
                                  const StopRequested& stop) {
  const int64_t n = int64_t(order.size());
  const int64_t per_call = int64_t(backend_.steps_per_call()) * cfg_.batch_size * std::max(cfg_.ranks, 1);
  const float lr = static_cast<float>(ckpt_.lr_current);
  while (ckpt_.epoch_images_done < n) {
    // Asked before every call, the epoch's first included, so that a run whose epochs are
    // one call each still stops at the next epoch.
    if (backend_.any_rank(stop && stop())) {
      take_backend_state();
      reconstruct_samples();
      return false;
    }
    const int64_t first = ckpt_.epoch_images_done, count = std::min(per_call, n - first);
    const std::vector<int64_t> part(order.begin() + first, order.begin() + first + count);
    const double loss_before = ckpt_.epoch_loss_sum;
    cae::Stopwatch clock;
    // No callback without a listener: a GPU backend reads the loss back for it (a host
    // synchronisation) every few steps.
    ae::StepCallback step_progress;
    if (on_progress)
      step_progress = [&](int64_t done, double running) {
        on_progress(epoch, first + done, n, (loss_before + running * double(done)) / double(first + done));
      };
    const double mean = backend_.train_epoch(part, cfg_.batch_size, lr, step_progress);
    ckpt_.epoch_train_seconds += clock.seconds();
    ckpt_.epoch_loss_sum += mean * double(count);
    ckpt_.epoch_images_done += count;
    if (!std::isfinite(mean)) return true;  // run() reports the divergence
  }
  return true;
}

bool Trainer::run(const EpochDone& on_epoch, const Progress& on_progress, const EvalProgress& on_eval,
                  const StopRequested& stop) {
  const int64_t n = train_.size();
  if (ckpt_.epochs_done < cfg_.epochs) backend_.set_train_images(train_.images.data(), n);
  for (int epoch = static_cast<int>(ckpt_.epochs_done) + 1; epoch <= cfg_.epochs; ++epoch) {
    EpochResult r;
    r.epoch = epoch, r.epochs = cfg_.epochs;
    r.lr = ckpt_.lr_current;
    const std::vector<int64_t> order = epoch_order(ckpt_.seed, epoch, n);
    // The time of an interrupted epoch's earlier part counts towards this one.
    const double seconds_before = ckpt_.epoch_train_seconds;
    cae::Stopwatch clock;
    if (!train_rest_of_epoch(epoch, order, on_progress, stop)) return false;
    r.train_loss = n > 0 ? ckpt_.epoch_loss_sum / double(n) : 0.0;
    r.train_seconds = ckpt_.epoch_train_seconds;
    ckpt_.epoch_images_done = 0, ckpt_.epoch_loss_sum = 0.0, ckpt_.epoch_train_seconds = 0.0;
    // One backend call per evaluation pass (its sum order is part of the recorded loss),
    // announced before and after it.
    auto evaluate = [&](const char* split, const cae::ImageSplit& s) {
      if (on_eval) on_eval(epoch, split, 0, s.size());
      const double loss = backend_.eval_loss(s.images.data(), s.size(), cfg_.batch_size);
      if (on_eval) on_eval(epoch, split, s.size(), s.size());
      return loss;
    };
    r.val_loss = val_.size() > 0 ? evaluate("validation", val_) : std::numeric_limits<double>::quiet_NaN();
    // Without a test split the history still gets one value per epoch: the training loss.
    r.test_loss = test_.size() > 0 ? evaluate("test", test_) : r.train_loss;
    r.seconds = seconds_before + clock.seconds();
    // A non-finite loss means the weights are no longer usable: stop before they replace
    // the last good checkpoint.
    const struct {
      const char* name;
      double value;
      bool present;
    } losses[] = {{"train", r.train_loss, true}, {"validation", r.val_loss, val_.size() > 0}, {"test", r.test_loss, true}};
    for (const auto& l : losses)
      if (l.present && !std::isfinite(l.value))
        throw std::runtime_error(cae::strprintf(
            "training diverged in epoch %d (the %s loss became %s); %s. Try a lower --lr or --grad-clip", epoch, l.name,
            std::isnan(l.value) ? "NaN" : "Inf",
            epoch > 1 ? cae::strprintf("%s keeps epoch %d", cfg_.output_name.c_str(), epoch - 1).c_str()
                      : "no model was written"));

    take_backend_state();
    ckpt_.train_loss.push_back(r.train_loss);
    ckpt_.val_loss.push_back(r.val_loss);
    ckpt_.test_loss.push_back(r.test_loss);
    ckpt_.epoch_seconds.push_back(r.seconds);
    ckpt_.lr.push_back(r.lr);
    ckpt_.epochs_done = epoch;
    ckpt_.total_seconds += r.seconds;
    ckpt_.train_seconds += r.train_seconds;
    ckpt_.images_per_second = double(n) * double(epoch) / ckpt_.train_seconds;
    // Validation steers the schedule; the test split is only reported.
    r.monitors_val = val_.size() > 0;
    r.lr_reduced = plateau_step(r.monitors_val ? r.val_loss : r.train_loss, cfg_.plateau_factor, cfg_.plateau_patience, ckpt_);
    reconstruct_samples();
    on_epoch(ckpt_, r);
  }
  return true;
}

}  // namespace ae
