#include "kernels/ae/train_session.h"

#include <omp.h>
#include <sys/stat.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <utility>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/data_parallel.h"
#include "common/stop_signal.h"

namespace ae {
namespace {

// The checkpoint of each epoch, written on a thread of its own, one at a time and in order:
// the next epoch trains while the last one's file (9 MB for the seed model, fsync'ed)
// reaches the disk, instead of the GPU waiting for it every epoch (docs/DECISIONS.md, "ae-train
// writes each epoch's checkpoint while the next epoch trains"). HDF5 is not thread-safe: while a write is in flight the training thread makes no
// HDF5 call, and every path out of the run waits for it first (the destructor too).
class CheckpointWrites {
 public:
  CheckpointWrites() = default;
  CheckpointWrites(const CheckpointWrites&) = delete;
  CheckpointWrites& operator=(const CheckpointWrites&) = delete;
  ~CheckpointWrites() {
    if (pending_.valid()) pending_.wait();  // unwinding: an error is already on its way
  }
  // Waits for the previous write (rethrowing its error), then starts `write`.
  void start(std::function<void()> write) {
    wait();
    pending_ = std::async(std::launch::async, std::move(write));
  }
  // Waits for the write in flight, if any, and rethrows its error (the write phase's time).
  void wait() {
    if (!pending_.valid()) return;
    cae::PhaseScope waiting(cae::Phase::write);
    pending_.get();
  }

 private:
  std::future<void> pending_;
};

// 751875 → "751,875"
std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// The line a Ctrl-C prints (the handler in atomic_output.cpp removes the temporary file,
// prints this and dies by the signal).
void set_stop_message(const std::string& output, int epochs_done, int epochs) {
  if (epochs_done == 0) {
    cae::set_signal_message("ae-train: stopped before epoch 1 of " + std::to_string(epochs) +
                            " finished; no model was written to " + output);
    return;
  }
  cae::set_signal_message("ae-train: stopped after epoch " + std::to_string(epochs_done) + " of " +
                          std::to_string(epochs) + "; checkpoint in " + output + "; rerun with --resume to continue");
}

// The architecture from --encoder-channels and the dataset's image shape; anything the
// family cannot build (a bad list, H or W not divisible by 2^k) is a usage error.
Architecture build_architecture(const TrainRequest& req, const cae::DatasetReader& data) {
  try {
    return Architecture(data.channels(), data.height(), data.width(),
                        Architecture::parse_channels(req.encoder_channels));
  } catch (const std::invalid_argument& e) {
    throw cae::UsageError(std::string(e.what()) + " (" + req.data + " has images of " + data.image_shape_str() + ")");
  }
}

// The hold-out size, checked against the training images (and said when a batch is larger
// than what is left: allowed for tiny test runs, but said out loud).
int64_t validation_size(const TrainRequest& req, int64_t n_all) {
  const int64_t n_val = req.val_split >= 0 ? req.val_split : n_all / 10;
  cae::record_effective("val-split", std::to_string(n_val));
  if (n_val >= n_all)
    throw cae::UsageError("--val-split " + std::to_string(n_val) + " leaves no training image (" + req.data + " has " +
                          std::to_string(n_all) + (req.train_limit > 0 ? " within --train-limit)" : ")"));
  const int64_t n_train = n_all - n_val;
  if (req.trainer.batch_size > n_train)
    cae::log_warn("--batch-size %d is larger than the %lld training images%s: each epoch is one batch of %lld",
                  req.trainer.batch_size, static_cast<long long>(n_train),
                  n_val > 0 ? cae::strprintf(" (%lld less %lld held out for validation)", static_cast<long long>(n_all),
                                             static_cast<long long>(n_val)).c_str()
                            : "",
                  static_cast<long long>(n_train));
  return n_val;
}

// Resumes from req.output when asked and present, else starts, saying what happens to a
// checkpoint found there.
void start_or_resume(Trainer& trainer, const TrainRequest& req) {
  const std::string& out = req.output;
  if (!(req.resume && file_exists(out))) {
    if (req.resume) cae::log_info("no checkpoint at %s yet: starting from scratch", out.c_str());
    const std::string unfinished = req.resume ? "" : unfinished_run(out);
    if (!unfinished.empty())
      cae::log_info("%s holds an unfinished run (%s); without --resume it is replaced by a new run from scratch "
                    "(add --resume to continue it instead)", out.c_str(), unfinished.c_str());
    trainer.start();
    return;
  }
  trainer.resume(read_checkpoint(out));
  const Checkpoint& c = trainer.checkpoint();
  if (c.epoch_images_done > 0)
    cae::log_info("resuming %s inside epoch %lld, after %lld of its %lld images (lr %g)", out.c_str(),
                  static_cast<long long>(c.epochs_done + 1), static_cast<long long>(c.epoch_images_done),
                  static_cast<long long>(trainer.train_count()), c.lr_current);
  else
    cae::log_info("resuming %s after epoch %lld (lr %g)", out.c_str(), static_cast<long long>(c.epochs_done), c.lr_current);
  // The schedule is part of the run being continued: a new --lr does not restart it.
  const double lr = req.trainer.optimizer.lr, started_at = c.lr.empty() ? c.lr_current : c.lr.front();
  if (req.lr_given && std::fabs(lr - started_at) > 1e-6 * started_at)
    cae::log_info("--lr %g is not applied: the resumed run started at lr %g and continues its schedule at %g "
                  "(drop --resume, or use another -o, to train from scratch with --lr %g)",
                  lr, started_at, c.lr_current, lr);
}

// Progress bars of a run: one per epoch's training pass (with the whole run's ETA) and
// one per evaluation pass.
class RunProgress {
 public:
  RunProgress(const Trainer& t, int epochs)
      : epochs_(epochs), first_epoch_(t.checkpoint().epochs_done + 1),
        run_images_((epochs - first_epoch_ + 1) * t.train_count()) {}
  void training(int epoch, int64_t done, int64_t total, double loss) {
    if (!bar_ || bar_epoch_ != epoch) {
      bar_ = std::make_unique<cae::ProgressBar>(cae::strprintf("epoch %d/%d", epoch, epochs_), total, "img");
      bar_->set_run((epoch - first_epoch_) * total, run_images_, clock_.seconds());
      bar_epoch_ = epoch;
    }
    bar_->update(done, cae::strprintf("loss %.5f", loss));
  }
  void evaluation(int epoch, const char* split, int64_t done, int64_t total) {
    if (done == 0) {
      bar_ = std::make_unique<cae::ProgressBar>(cae::strprintf("epoch %d/%d %s", epoch, epochs_, split), total, "img");
      bar_epoch_ = 0;  // the next epoch's training pass opens its own bar
    }
    bar_->update(done);
  }
  void clear() { bar_.reset(); }

 private:
  int epochs_;
  int64_t first_epoch_, run_images_;
  cae::Stopwatch clock_;
  std::unique_ptr<cae::ProgressBar> bar_;
  int bar_epoch_ = 0;
};

}  // namespace

std::string unfinished_run(const std::string& path) {
  if (!file_exists(path)) return "";
  try {
    cae::Hdf5Reader r(path);
    if (!r.has_attr("/", "format") || r.attr_string("/", "format") != "ae-model") return "";
    const int64_t done = r.attr_int("/", "epochs_done"), target = r.attr_int("/", "epochs_target");
    if (done >= target) return "";
    return std::to_string(done) + " of " + std::to_string(target) + " epochs";
  } catch (const std::exception&) {
    return "";  // not a checkpoint we can read: it is replaced like any other file
  }
}

TrainResult run_training(const TrainRequest& req) {
  const TrainerConfig& asked = req.trainer;
  if (asked.plateau_factor <= 0.0f) throw cae::UsageError("--lr-plateau-factor must be in (0, 1], not 0");
  if (!std::isfinite(asked.optimizer.lr) || asked.optimizer.lr <= 0.0f)
    throw cae::UsageError("--lr must be a positive finite number");
  const DataParallelGroup group = data_parallel_group(req.group, req.output);
  const bool grouped = group.world > 1 || !group.rendezvous.empty();
  if (grouped && req.device.get() != cae::Device::gpu) throw cae::UsageError("data-parallel training needs --device gpu");
  TrainResult result;
  // Rank 0 speaks for the group: it alone logs, draws progress, checkpoints and writes -o.
  result.lead = group.rank == 0;
  if (!result.lead) cae::set_quiet(true);
  auto check_precision = [&req](bool on_cpu) {
    if (req.precision == Precision::bf16 && on_cpu)
      throw cae::UsageError("--precision bf16 needs --device gpu (the CPU path computes in fp32)");
  };
  check_precision(!req.device.may_use_gpu());
  const int threads = req.threads > 0 ? req.threads : omp_get_max_threads();

  // A single GPU's context is made, and before it the driver asked, while the images are read
  // (a group's ranks choose their GPUs in the backend).
  if (req.device.may_use_gpu() && !grouped) cae::start_gpu_context(0);
  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  cae::DatasetReader data(req.data);
  // The dataset's sha256 (the model's provenance) on a thread of its own once the file has
  // opened as a dataset: hashed after the read it lengthened every CIFAR-10 run
  // (docs/BENCHMARKS.md, "The weight pack, Adam's grid, the input im2col,
  // the epilogue tile's pitch").
  cae::BackgroundHashes data_hash({req.data});
  const Architecture arch = build_architecture(req, data);
  cae::ImageSplit train_split = data.read("train", req.train_limit);
  cae::ImageSplit test_split = data.read("test");
  if (train_split.size() == 0) cae::fail_file(req.data, "has no training images");
  phase.emplace(cae::Phase::startup);  // the device: what is left of the driver's answer, the backend
  const cae::Device device = req.device.get();
  check_precision(device == cae::Device::cpu);  // --device auto without a GPU
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(threads));

  TrainerConfig tc = asked;
  tc.val_split = validation_size(req, train_split.size());
  tc.device = cae::device_name(device);
  tc.precision = precision_name(req.precision);
  tc.threads = threads;
  tc.ranks = group.world;
  tc.output_name = req.output;
  std::unique_ptr<AeBackend> backend = make_backend(device, arch, tc.optimizer, req.precision, threads, group);
  result.backend = backend->describe();

  const cae::InputFile data_input = data_hash.get().front();
  // On either thread: no phase of its own, and the provenance taken by the caller.
  auto write_model = [&req](const Checkpoint& c, const cae::Provenance& provenance) {
    cae::AtomicOutput out(req.output);
    write_checkpoint(out.temp_path(), req.output, c, provenance);
    out.commit();
  };
  auto provenance = [&] { return cae::Provenance{"ae-model", 1, cae::options_json(), {data_input}}; };
  auto save = [&](const Checkpoint& c) {
    cae::PhaseScope writing(cae::Phase::write);
    write_model(c, provenance());
  };
  CheckpointWrites epoch_writes;
  phase.emplace(cae::Phase::compute);  // training, and the evaluation passes of each epoch
  Trainer trainer(tc, *backend, std::move(train_split), std::move(test_split), data_input.sha256);
  start_or_resume(trainer, req);

  cae::log_info("autoencoder %s: %s parameters", arch.describe().c_str(), with_commas(arch.param_count()).c_str());
  cae::log_info("%s training, %s validation and %s test images; batch %d, %s, lr %g; %s",
                with_commas(trainer.train_count()).c_str(), with_commas(trainer.val_count()).c_str(),
                with_commas(trainer.test_count()).c_str(), tc.batch_size, tc.optimizer.kind.c_str(),
                trainer.checkpoint().lr_current, result.backend.c_str());
  if (trainer.finished()) {
    cae::log_info("%s already has %lld of %d epochs: nothing to do", req.output.c_str(),
                  static_cast<long long>(trainer.checkpoint().epochs_done), tc.epochs);
    result.checkpoint = trainer.checkpoint();
    return result;
  }
  if (tc.epochs == 0) {  // the initial weights only
    if (result.lead) {
      trainer.reconstruct_samples();
      save(trainer.checkpoint());
      cae::log_info("--epochs 0: wrote %s with the untrained initial weights (seed %lld)", req.output.c_str(),
                    static_cast<long long>(tc.seed));
    }
    result.checkpoint = trainer.checkpoint();
    return result;
  }

  if (result.lead) set_stop_message(req.output, int(trainer.checkpoint().epochs_done), tc.epochs);
  cae::StopSignals stop_signals;
  const auto stop_requested = [&] { return stop_signals.requested(); };
  RunProgress progress(trainer, tc.epochs);
  // The other ranks train in step with rank 0 and write nothing.
  const bool finished = trainer.run(
      [&](const Checkpoint& c, const EpochResult& r) {
        if (!result.lead) return;
        progress.clear();
        epoch_writes.start([&write_model, c, p = provenance()] { write_model(c, p); });  // a copy of c
        set_stop_message(req.output, r.epoch, r.epochs);
        const std::string val = r.monitors_val ? cae::strprintf(", val loss %.6f", r.val_loss) : "";
        cae::log_info("epoch %d/%d: train loss %.6f%s, test loss %.6f, %.1f s, %.0f img/s, lr %g", r.epoch, r.epochs,
                      r.train_loss, val.c_str(), r.test_loss, r.seconds, double(trainer.train_count()) / r.train_seconds,
                      r.lr);
        if (r.lr_reduced)
          cae::log_info("%s loss has not improved for %d epochs: lr %g -> %g", r.monitors_val ? "validation" : "train",
                        tc.plateau_patience + 1, r.lr, c.lr_current);
      },
      // Only where a bar is drawn (rank 0 on a terminal): the GPU reads the loss back for it.
      result.lead && cae::stderr_is_tty()
          ? Trainer::Progress([&](int epoch, int64_t done, int64_t total, double loss) {
              progress.training(epoch, done, total, loss);
            })
          : Trainer::Progress(),
      [&](int epoch, const char* split, int64_t done, int64_t total) {
        if (result.lead) progress.evaluation(epoch, split, done, total);
      },
      stop_requested);
  progress.clear();
  epoch_writes.wait();  // the last epoch's checkpoint is the output
  result.checkpoint = trainer.checkpoint();
  result.interrupted = !finished;
  if (result.interrupted && result.lead) {
    const Checkpoint& c = trainer.checkpoint();
    save(c);
    // Printed even with --quiet: the exit status alone does not say where the checkpoint is.
    fprintf(stderr, "ae-train: interrupted by %s in epoch %lld of %d (%lld of %lld images trained); checkpoint in %s; "
            "rerun the same command with --resume to continue\n",
            stop_signals.signal() == SIGUSR1 ? "SIGUSR1" : "SIGTERM", static_cast<long long>(c.epochs_done + 1),
            tc.epochs, static_cast<long long>(c.epoch_images_done), static_cast<long long>(trainer.train_count()),
            req.output.c_str());
  }
  cae::set_signal_message("");
  if (finished && result.lead) {
    const Checkpoint& c = trainer.checkpoint();
    cae::log_info("wrote %s: %lld epochs, train loss %.6f, test loss %.6f, %.1f s", req.output.c_str(),
                  static_cast<long long>(c.epochs_done), c.train_loss.back(), c.test_loss.back(), c.total_seconds);
  }
  return result;
}

}  // namespace ae
