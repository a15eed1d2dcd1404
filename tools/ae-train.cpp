// ae-train: train a convolutional autoencoder of the family in kernels/ae/model.h on an
// image-dataset file, checkpointing model.h5 after every epoch (docs/FORMATS.md,
// "ae-model"). The loop itself is ae::Trainer (kernels/ae/trainer.h); this file turns
// options into a Trainer, draws progress and writes checkpoints.
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/group.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/data_parallel.h"
#include "kernels/ae/model.h"
#include "kernels/ae/stop_signal.h"
#include "kernels/ae/trainer.h"

namespace {

const cae::ToolInfo kInfo{"ae-train", "train the convolutional autoencoder (default: CIFAR-10 -> 8,192-d code)",
                          "ae-train --data data/cifar10.h5 --epochs 20 -o data/run/model.h5", true, true,
                          "try a smaller --batch-size"};

struct Options {
  std::string data;
  std::string encoder_channels = "256,128";
  int epochs = 20;
  int batch_size = 64;
  std::string optimizer = "adam";
  float lr = 1e-3f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  float plateau_factor = 0.5f;
  int plateau_patience = 2;
  float grad_clip = 0.0f;
  int64_t seed = 1;
  int64_t train_limit = 0;
  int64_t val_split = -1;  // -1: a tenth of the training images (docs/DECISIONS.md)
  int threads = 0;
  std::string precision = "fp32";
  bool resume = false;
  // Data parallelism (docs/MULTI_GPU.md): --gpus starts the ranks; each rank gets
  // --rank/--world-size/--local-rank/--rendezvous (or Slurm's or torchrun's variables).
  cae::GroupOptions group;
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

// Set in main: whether --lr was given (a resumed run keeps its own schedule).
const CLI::Option* g_lr_option = nullptr;

// What a run without --resume is about to replace: "" unless `path` is an ae-model
// checkpoint of an unfinished run (then "3 of 20 epochs").
std::string unfinished_checkpoint(const std::string& path) {
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

// The line a Ctrl-C or SIGTERM prints (the handler in atomic_output.cpp removes the
// temporary file, prints this and dies by the signal).
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
ae::Architecture build_architecture(const Options& opt, const cae::DatasetReader& data) {
  try {
    return ae::Architecture(data.channels(), data.height(), data.width(),
                            ae::Architecture::parse_channels(opt.encoder_channels));
  } catch (const std::invalid_argument& e) {
    throw cae::UsageError(std::string(e.what()) + " (" + opt.data + " has images of " + data.image_shape_str() + ")");
  }
}

void write_checkpoint(const ae::Checkpoint& c, const cae::CommonOptions& common, const cae::InputFile& data_input) {
  cae::PhaseScope writing(cae::Phase::write);
  cae::AtomicOutput out(common.output);
  cae::Provenance prov{"ae-model", 1, cae::options_json(), {data_input}};
  ae::write_checkpoint(out.temp_path(), common.output, c, prov);
  out.commit();
}

// The --json line; losses are null before the first epoch (and val_loss without a hold-out).
void emit_summary(const cae::CommonOptions& common, const ae::Checkpoint& c, const std::string& device) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("epochs", c.epochs_done)
                             .add("train_loss", c.train_loss.empty() ? none : c.train_loss.back())
                             .add("val_loss", c.val_loss.empty() ? none : c.val_loss.back())
                             .add("test_loss", c.test_loss.empty() ? none : c.test_loss.back())
                             .add("seconds", c.total_seconds)
                             .add("images_per_second", c.images_per_second)
                             .add("device", device)
                             .add_raw("phases", cae::phases_json())
                             .str());
}

// --gpus N: this process starts N ranks of itself on this node's GPUs and waits for them.
void launch_gpus(const Options& opt, const cae::CommonOptions& common) {
  if (cae::resolve_device(common.device) != cae::Device::gpu)
    throw cae::UsageError("--gpus needs --device gpu (or auto on a machine with GPUs)");
  const int visible = cae::gpu_count();
  if (opt.group.launch > visible)
    throw cae::UsageError("--gpus " + std::to_string(opt.group.launch) + ": this machine has " +
                          std::to_string(visible) + " GPU" + (visible == 1 ? "" : "s"));
  cae::launch_group(opt.group, common.output);
}

void train(const Options& opt, const cae::CommonOptions& common) {
  if (opt.group.launch > 0) return launch_gpus(opt, common);
  if (opt.plateau_factor <= 0.0f) throw cae::UsageError("--lr-plateau-factor must be in (0, 1], not 0");
  if (!std::isfinite(opt.lr) || opt.lr <= 0.0f) throw cae::UsageError("--lr must be a positive finite number");
  const cae::Device device = cae::resolve_device(common.device);
  const cae::GroupPlace rank = cae::resolve_group_place(opt.group.rank, opt.group.world_size, opt.group.local_rank);
  const bool grouped = rank.world > 1 || !opt.group.rendezvous.empty();
  if (grouped && device != cae::Device::gpu) throw cae::UsageError("data-parallel training needs --device gpu");
  ae::DataParallelGroup group{rank.rank, rank.world, rank.local_rank, opt.group.rendezvous, opt.group.timeout_seconds};
  // The file through which rank 0 hands the NCCL id to the others: beside -o (a folder
  // every rank sees), named after the Slurm job step or the torchrun run, unless given.
  if (grouped) group.rendezvous = cae::group_rendezvous_path(opt.group.rendezvous, common.output, rank);
  // Rank 0 speaks for the group: it alone logs, draws progress, checkpoints and writes -o.
  const bool lead = rank.rank == 0;
  if (!lead) cae::set_quiet(true);
  if (opt.precision == "bf16" && device == cae::Device::cpu)
    throw cae::UsageError("--precision bf16 needs --device gpu (the CPU path computes in fp32)");
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
  if (device == cae::Device::cpu) cae::record_effective("threads", std::to_string(threads));

  std::optional<cae::PhaseScope> phase(cae::Phase::read);
  cae::DatasetReader data(opt.data);
  const ae::Architecture arch = build_architecture(opt, data);
  cae::ImageSplit train_split = data.read("train", opt.train_limit);
  cae::ImageSplit test_split = data.read("test");
  if (train_split.size() == 0) cae::fail_file(opt.data, "has no training images");
  const int64_t n_all = train_split.size();
  const int64_t n_val = opt.val_split >= 0 ? opt.val_split : n_all / 10;
  cae::record_effective("val-split", std::to_string(n_val));
  if (n_val >= n_all)
    throw cae::UsageError("--val-split " + std::to_string(n_val) + " leaves no training image (" + opt.data + " has " +
                          std::to_string(n_all) + (opt.train_limit > 0 ? " within --train-limit)" : ")"));
  const int64_t n_train = n_all - n_val;
  // A batch larger than the data trains one short batch per epoch: allowed (tiny test
  // runs), but said out loud.
  if (opt.batch_size > n_train)
    cae::log_warn("--batch-size %d is larger than the %lld training images%s: each epoch is one batch of %lld",
                  opt.batch_size, static_cast<long long>(n_train),
                  n_val > 0 ? cae::strprintf(" (%lld less %lld held out for validation)", static_cast<long long>(n_all),
                                             static_cast<long long>(n_val)).c_str()
                            : "",
                  static_cast<long long>(n_train));

  ae::TrainerConfig tc;
  tc.epochs = opt.epochs;
  tc.batch_size = opt.batch_size;
  tc.optimizer.kind = opt.optimizer;
  tc.optimizer.lr = opt.lr;
  tc.optimizer.momentum = opt.momentum;
  tc.optimizer.weight_decay = opt.weight_decay;
  tc.optimizer.grad_clip = opt.grad_clip;
  tc.plateau_factor = opt.plateau_factor;
  tc.plateau_patience = opt.plateau_patience;
  tc.seed = static_cast<uint64_t>(opt.seed);
  tc.val_split = n_val;
  tc.device = cae::device_name(device);
  const ae::Precision precision = opt.precision == "bf16" ? ae::Precision::bf16 : ae::Precision::fp32;
  tc.precision = ae::precision_name(precision);
  tc.threads = threads;
  tc.output_name = common.output;
  std::unique_ptr<ae::AeBackend> backend = grouped ? ae::make_gpu_backend(arch, tc.optimizer, precision, group)
                                           : device == cae::Device::gpu
                                               ? ae::make_gpu_backend(arch, tc.optimizer, precision)
                                               : ae::make_cpu_backend(arch, tc.optimizer, threads);

  const cae::InputFile data_input = [&] {
    cae::PhaseScope hashing(cae::Phase::hash);
    return cae::hash_input(opt.data);
  }();
  phase.emplace(cae::Phase::compute);  // training, and the evaluation passes of each epoch
  ae::Trainer trainer(tc, *backend, std::move(train_split), std::move(test_split), data_input.sha256);
  if (opt.resume && file_exists(common.output)) {
    trainer.resume(ae::read_checkpoint(common.output));
    const ae::Checkpoint& c = trainer.checkpoint();
    if (c.epoch_images_done > 0)
      cae::log_info("resuming %s inside epoch %lld, after %lld of its %lld images (lr %g)", common.output.c_str(),
                    static_cast<long long>(c.epochs_done + 1), static_cast<long long>(c.epoch_images_done),
                    static_cast<long long>(trainer.train_count()), c.lr_current);
    else
      cae::log_info("resuming %s after epoch %lld (lr %g)", common.output.c_str(), static_cast<long long>(c.epochs_done),
                    c.lr_current);
    // The schedule is part of the run being continued: a new --lr does not restart it.
    const double started_at = c.lr.empty() ? c.lr_current : c.lr.front();
    if (g_lr_option && g_lr_option->count() > 0 && std::fabs(double(opt.lr) - started_at) > 1e-6 * started_at)
      cae::log_info("--lr %g is not applied: the resumed run started at lr %g and continues its schedule at %g "
                    "(drop --resume, or use another -o, to train from scratch with --lr %g)",
                    double(opt.lr), started_at, c.lr_current, double(opt.lr));
  } else {
    if (opt.resume) cae::log_info("no checkpoint at %s yet: starting from scratch", common.output.c_str());
    const std::string unfinished = opt.resume ? "" : unfinished_checkpoint(common.output);
    if (!unfinished.empty())
      cae::log_info("%s holds an unfinished run (%s); without --resume it is replaced by a new run from scratch "
                    "(add --resume to continue it instead)", common.output.c_str(), unfinished.c_str());
    trainer.start();
  }

  cae::log_info("autoencoder %s: %s parameters", arch.describe().c_str(), with_commas(arch.param_count()).c_str());
  cae::log_info("%s training, %s validation and %s test images; batch %d, %s, lr %g; %s",
                with_commas(trainer.train_count()).c_str(), with_commas(trainer.val_count()).c_str(),
                with_commas(trainer.test_count()).c_str(), opt.batch_size, opt.optimizer.c_str(),
                trainer.checkpoint().lr_current, backend->describe().c_str());
  if (trainer.finished()) {
    cae::log_info("%s already has %lld of %d epochs: nothing to do", common.output.c_str(),
                  static_cast<long long>(trainer.checkpoint().epochs_done), opt.epochs);
    if (lead) emit_summary(common, trainer.checkpoint(), backend->describe());
    return;
  }
  if (opt.epochs == 0) {  // the initial weights only
    if (!lead) return;
    trainer.reconstruct_samples();
    write_checkpoint(trainer.checkpoint(), common, data_input);
    cae::log_info("--epochs 0: wrote %s with the untrained initial weights (seed %lld)", common.output.c_str(),
                  static_cast<long long>(opt.seed));
    return emit_summary(common, trainer.checkpoint(), backend->describe());
  }

  // The whole run's ETA counts the training images of the epochs this process trains.
  const int64_t first_epoch = trainer.checkpoint().epochs_done + 1;
  const int64_t run_images = (opt.epochs - first_epoch + 1) * trainer.train_count();
  cae::Stopwatch run_clock;
  if (lead) set_stop_message(common.output, int(trainer.checkpoint().epochs_done), opt.epochs);
  std::unique_ptr<cae::ProgressBar> bar;
  int bar_epoch = 0;
  ae::StopSignals stop_signals;
  const auto stop_requested = [&] { return stop_signals.requested(); };
  if (!lead) {  // the other ranks train in step with rank 0 and write nothing
    if (!trainer.run([](const ae::Checkpoint&, const ae::EpochResult&) {}, nullptr, nullptr, stop_requested))
      std::exit(ae::kExitInterrupted);
    return;
  }
  const bool finished = trainer.run(
      [&](const ae::Checkpoint& c, const ae::EpochResult& r) {
        bar.reset();
        write_checkpoint(c, common, data_input);
        set_stop_message(common.output, r.epoch, r.epochs);
        const std::string val = r.monitors_val ? cae::strprintf(", val loss %.6f", r.val_loss) : "";
        cae::log_info("epoch %d/%d: train loss %.6f%s, test loss %.6f, %.1f s, %.0f img/s, lr %g", r.epoch, r.epochs,
                      r.train_loss, val.c_str(), r.test_loss, r.seconds, double(trainer.train_count()) / r.train_seconds,
                      r.lr);
        if (r.lr_reduced)
          cae::log_info("%s loss has not improved for %d epochs: lr %g -> %g", r.monitors_val ? "validation" : "train",
                        opt.plateau_patience + 1, r.lr, c.lr_current);
      },
      [&](int epoch, int64_t done, int64_t total, double loss) {
        if (!bar || bar_epoch != epoch) {
          bar = std::make_unique<cae::ProgressBar>(cae::strprintf("epoch %d/%d", epoch, opt.epochs), total, "img");
          bar->set_run((epoch - first_epoch) * total, run_images, run_clock.seconds());
          bar_epoch = epoch;
        }
        bar->update(done, cae::strprintf("loss %.5f", loss));
      },
      [&](int epoch, const char* split, int64_t done, int64_t total) {
        if (done == 0) {
          bar = std::make_unique<cae::ProgressBar>(cae::strprintf("epoch %d/%d %s", epoch, opt.epochs, split), total,
                                                   "img");
          bar_epoch = 0;  // the next epoch's training pass opens its own bar
        }
        bar->update(done);
      },
      stop_requested);
  bar.reset();
  if (!finished) {
    const ae::Checkpoint& c = trainer.checkpoint();
    write_checkpoint(c, common, data_input);
    fprintf(stderr, "ae-train: interrupted by %s in epoch %lld of %d (%lld of %lld images trained); checkpoint in %s; "
            "rerun the same command with --resume to continue\n",
            stop_signals.signal() == SIGUSR1 ? "SIGUSR1" : "SIGTERM", static_cast<long long>(c.epochs_done + 1),
            opt.epochs, static_cast<long long>(c.epoch_images_done), static_cast<long long>(trainer.train_count()),
            common.output.c_str());
    std::exit(ae::kExitInterrupted);
  }
  cae::set_signal_message("");
  const ae::Checkpoint& c = trainer.checkpoint();
  cae::log_info("wrote %s: %lld epochs, train loss %.6f, test loss %.6f, %.1f s", common.output.c_str(),
                static_cast<long long>(c.epochs_done), c.train_loss.back(), c.test_loss.back(), c.total_seconds);
  emit_summary(common, trainer.checkpoint(), backend->describe());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(
      argc, argv, kInfo, common,
      [&](CLI::App& app) {
        app.add_option("--data", opt.data, "image-dataset file (cifar-convert)")->required();
        app.add_option("--encoder-channels", opt.encoder_channels,
                       "Output channels of the encoder's conv+pool blocks, comma-separated (default 256,128: the "
                       "seed model); the image height and width must be divisible by 2^blocks");
        app.add_option("--epochs", opt.epochs, "Epochs to train (in total, counting those before --resume)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--batch-size", opt.batch_size, "Images per optimizer step")->check(CLI::PositiveNumber);
        app.add_option("--optimizer", opt.optimizer, "adam or sgd")->check(CLI::IsMember({"adam", "sgd"}));
        g_lr_option = app.add_option("--lr", opt.lr, "Learning rate")->check(CLI::PositiveNumber);
        app.add_option("--momentum", opt.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
        app.add_option("--weight-decay", opt.weight_decay, "L2 penalty added to the gradient (PyTorch semantics)")
            ->check(CLI::NonNegativeNumber);
        cae::default_means(app.add_option("--val-split", opt.val_split,
                                          "Training images held out as the validation set that steers the lr "
                                          "schedule (0 = none: the schedule reads the training loss)")
                               ->check(CLI::NonNegativeNumber),
                           "a tenth of the training images, 5,000 of CIFAR-10's 50,000");
        app.add_option("--lr-plateau-factor", opt.plateau_factor,
                       "Multiply the lr by this when the validation loss stops improving (1 = never)")
            ->check(CLI::Range(0.0, 1.0));
        app.add_option("--lr-plateau-patience", opt.plateau_patience, "Epochs without improvement before reducing the lr")
            ->check(CLI::NonNegativeNumber);
        cae::default_means(app.add_option("--grad-clip", opt.grad_clip,
                                          "Clip the gradient's global L2 norm to this (0 = off)")
                               ->check(CLI::NonNegativeNumber),
                           "off");
        app.add_option("--seed", opt.seed, "Seed of the initial weights and of every epoch's shuffle")
            ->check(CLI::NonNegativeNumber);
        cae::default_means(app.add_option("--train-limit", opt.train_limit,
                                          "Use the first N training images (0 = all), validation included")
                               ->check(CLI::NonNegativeNumber),
                           "all");
        cae::default_means(app.add_option("--threads", opt.threads, "CPU threads (at most 4x the cores)")
                               ->check(CLI::NonNegativeNumber),
                           "OMP_NUM_THREADS, else all cores");
        app.add_option("--precision", opt.precision, "fp32, or bf16 (GPU only; master weights stay fp32)")
            ->check(CLI::IsMember({"fp32", "bf16"}));
        app.add_flag("--resume", opt.resume,
                     "Continue the run checkpointed in -o (same data and options; the learning rate and its "
                     "schedule continue from the checkpoint)");
        cae::add_group_options(app, opt.group,
                               "trains its shard of every global batch (one GPU each, NCCL; --batch-size is per "
                               "GPU; docs/MULTI_GPU.md)",
                               /*gpus=*/true, /*cpu_ranks=*/false);
      },
      [&] { train(opt, common); });
}
