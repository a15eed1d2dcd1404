// ae-train: train a convolutional autoencoder of the family in kernels/ae/model.h on an
// image-dataset file, checkpointing model.h5 after every epoch (docs/FORMATS.md,
// "ae-model"); SIGUSR1/SIGTERM save a mid-epoch checkpoint and exit 75, --resume continues
// (docs/RELIABILITY.md, "Preemption"). The work is ae::run_training
// (kernels/ae/train_session.h); this file turns options into a TrainRequest.
#include <cstdlib>
#include <limits>

#include "common/cli.h"
#include "common/device.h"
#include "common/group.h"
#include "common/json.h"
#include "common/phases.h"
#include "common/stop_signal.h"
#include "kernels/ae/train_session.h"

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
  float lr = 3e-4f;  // not the seeds' 1e-3: it keeps the latent alive (docs/DECISIONS.md)
  const CLI::Option* lr_option = nullptr;  // whether --lr was given (a resumed run keeps its schedule)
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

void add_options(CLI::App& app, Options& opt) {
  app.add_option("--data", opt.data, "image-dataset file (cifar-convert)")->required();
  app.add_option("--encoder-channels", opt.encoder_channels,
                 "Output channels of the encoder's conv+pool blocks, comma-separated (default 256,128: the "
                 "seed model); the image height and width must be divisible by 2^blocks");
  app.add_option("--epochs", opt.epochs, "Epochs to train (in total, counting those before --resume)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch-size", opt.batch_size, "Images per optimizer step")->check(CLI::PositiveNumber);
  app.add_option("--optimizer", opt.optimizer, "adam or sgd")->check(CLI::IsMember({"adam", "sgd"}));
  opt.lr_option = app.add_option("--lr", opt.lr, "Learning rate (the seeds used 0.001, which leaves most latent units dead: docs/DECISIONS.md)")->check(CLI::PositiveNumber);
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
  cae::default_means(
      app.add_option("--grad-clip", opt.grad_clip, "Clip the gradient's global L2 norm to this (0 = off)")->check(CLI::NonNegativeNumber),
      "off");
  app.add_option("--seed", opt.seed, "Seed of the initial weights and of every epoch's shuffle")
      ->check(CLI::NonNegativeNumber);
  cae::default_means(app.add_option("--train-limit", opt.train_limit,
                                    "Use the first N training images (0 = all), validation included")
                         ->check(CLI::NonNegativeNumber),
                     "all");
  cae::add_threads_option(app, opt.threads, "CPU threads (at most 4x the cores)", "OMP_NUM_THREADS, else all cores");
  app.add_option("--precision", opt.precision, "fp32, or bf16 (GPU only; master weights stay fp32)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_flag("--resume", opt.resume,
               "Continue the run checkpointed in -o (same data and options; the learning rate and its "
               "schedule continue from the checkpoint)");
  cae::add_group_options(app, opt.group,
                         "trains its shard of every global batch (one GPU each, NCCL; --batch-size is per "
                         "GPU; docs/MULTI_GPU.md)",
                         /*gpus=*/true, /*cpu_ranks=*/false);
}

// The --json line; losses are null before the first epoch (and val_loss without a hold-out).
void emit_summary(const cae::CommonOptions& common, const ae::TrainResult& r) {
  const ae::Checkpoint& c = r.checkpoint;
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
                             .add("device", r.backend)
                             .add_raw("phases", cae::phases_json())
                             .str());
}

void run(const Options& opt, const cae::CommonOptions& common) {
  // The CUDA driver is asked from here on, beside the read (common/device.h).
  const cae::DeviceChoice device(common.device);
  // --gpus N: this process starts N ranks of itself on this node's GPUs and waits for them.
  if (opt.group.launch > 0) {
    cae::launch_group_checked(opt.group, device.get() == cae::Device::gpu, common.output, /*share_cores=*/false);
    return;
  }
  ae::TrainRequest req;
  req.data = opt.data;
  req.output = common.output;
  req.encoder_channels = opt.encoder_channels;
  ae::TrainerConfig& tc = req.trainer;
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
  req.train_limit = opt.train_limit;
  req.val_split = opt.val_split;
  req.device = device;
  req.precision = opt.precision == "bf16" ? ae::Precision::bf16 : ae::Precision::fp32;
  req.threads = opt.threads;
  req.resume = opt.resume;
  req.lr_given = opt.lr_option && opt.lr_option->count() > 0;
  req.group = opt.group;
  const ae::TrainResult result = ae::run_training(req);
  if (result.interrupted) throw cae::Interrupted("");  // the checkpoint is written and said
  if (result.lead) emit_summary(common, result);
}

}  // namespace

int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
