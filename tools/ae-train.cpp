// ae-train: train the convolutional autoencoder on a cifar10-dataset file, checkpointing
// model.h5 after every epoch (see docs/FORMATS.md, "ae-model").
#include <omp.h>
#include <sys/stat.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/ae/checkpoint.h"
#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/dataset.h"
#include "common/device.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/json.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/timer.h"
#include "kernels/ae/model.h"
#include "kernels/ae/cpu/backend_cpu.h"

namespace {

const cae::ToolInfo kInfo{"ae-train", "train the convolutional autoencoder (CIFAR-10 -> 8,192-d code)",
                          "ae-train --data data/cifar10.h5 --epochs 20 -o data/run/model.h5", true, true,
                          "try a smaller --batch-size"};

struct Options {
  std::string data;
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
  int threads = 0;
  std::string precision = "fp32";
  bool resume = false;
  std::string dump_gradients;  // hidden: one forward+backward, for the PyTorch check
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

// The visiting order of epoch `epoch` (1-based): a Fisher–Yates shuffle seeded from
// (seed, epoch) only, so a resumed run shuffles exactly like an uninterrupted one.
// std::seed_seq and mt19937_64 are fully specified, unlike std::shuffle.
std::vector<int64_t> epoch_order(uint64_t seed, int epoch, int64_t n) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(epoch)};
  std::mt19937_64 rng(seq);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % uint64_t(i + 1)]);
  return order;
}

// torch.optim.lr_scheduler.ReduceLROnPlateau(mode="min", threshold=1e-4 relative,
// cooldown=0, min_lr=0, eps=1e-8). Returns true when the rate was reduced.
bool plateau_step(double monitored, const Options& opt, cae::AeCheckpoint& c) {
  if (monitored < c.plateau_best * (1.0 - 1e-4)) {
    c.plateau_best = monitored;
    c.plateau_bad_epochs = 0;
    return false;
  }
  if (++c.plateau_bad_epochs <= opt.plateau_patience) return false;
  c.plateau_bad_epochs = 0;
  const double reduced = c.lr_current * opt.plateau_factor;
  if (c.lr_current - reduced <= 1e-8) return false;
  c.lr_current = reduced;
  return true;
}

// The first test image of each class, in class order.
void pick_samples(const cae::ImageSplit& test, cae::AeCheckpoint& c) {
  c.sample_images.clear();
  c.sample_labels.clear();
  for (int cls = 0; cls < cae::kNumClasses; ++cls)
    for (int64_t i = 0; i < test.size(); ++i)
      if (test.labels[i] == cls) {
        c.sample_labels.push_back(static_cast<uint8_t>(cls));
        c.sample_images.insert(c.sample_images.end(), test.images.begin() + i * cae::kImageBytes,
                               test.images.begin() + (i + 1) * cae::kImageBytes);
        break;
      }
}

// --resume only continues a run with the same data and the options that shape its
// trajectory; anything else would silently produce a model nobody asked for.
void check_resumable(const cae::AeCheckpoint& c, const Options& opt, const std::string& file, int64_t train_count,
                     const std::string& data_sha256, const std::string& device, int threads) {
  auto mismatch = [&](const std::string& was, const std::string& now) {
    throw cae::UsageError(file + ": cannot --resume: it was trained with " + was + ", this run has " + now +
                          " (use the same data and options, or drop --resume to start over)");
  };
  auto num = [](const char* what, int64_t v) { return std::string(what) + " " + std::to_string(v); };
  if (c.data_sha256 != data_sha256)
    mismatch("a dataset of sha256 " + c.data_sha256.substr(0, 12) + "…", "one of sha256 " + data_sha256.substr(0, 12) + "…");
  if (c.train_count != train_count)
    mismatch(std::to_string(c.train_count) + " training images", std::to_string(train_count));
  if (c.seed != uint64_t(opt.seed)) mismatch(num("--seed", int64_t(c.seed)), num("--seed", opt.seed));
  if (c.batch_size != opt.batch_size) mismatch(num("--batch-size", c.batch_size), num("--batch-size", opt.batch_size));
  if (c.optimizer_kind != opt.optimizer) mismatch("--optimizer " + c.optimizer_kind, "--optimizer " + opt.optimizer);
  if (c.device != device)
    cae::log_warn("%s was trained with --device %s, this run uses --device %s", file.c_str(), c.device.c_str(),
                  device.c_str());
  else if (device == "cpu" && c.threads != threads)
    cae::log_warn("%s was trained with %lld threads, this run uses %d: the result will not be bit-identical to an "
                  "uninterrupted run", file.c_str(), static_cast<long long>(c.threads), threads);
}

void write_checkpoint(const cae::AeCheckpoint& c, const cae::CommonOptions& common, const cae::InputFile& data_input) {
  cae::AtomicOutput out(common.output);
  cae::Provenance prov{"ae-model", 1, cae::options_json(), {data_input}};
  cae::write_ae_checkpoint(out.temp_path(), common.output, c, prov);
  out.commit();
}

// Hidden --dump-gradients: loss, outputs and parameter gradients of one batch (the first
// --batch-size training images) with the weights of -o (with --resume) or the seeded
// initialisation, computed by the CPU reference. tests/python/torch_reference.py
// compares them with PyTorch.
void dump_gradients(const Options& opt, const cae::CommonOptions& common, const cae::ImageSplit& train, int threads) {
  std::vector<float> params =
      opt.resume && file_exists(common.output) ? cae::read_ae_params(common.output) : ae::init_params(opt.seed);
  const int n = static_cast<int>(std::min<int64_t>(opt.batch_size, train.size()));
  std::vector<float> outputs(size_t(n) * ae::kImageDim), grad(ae::kParamCount);
  ae::ForwardDecisions dec;
  const double loss =
      ae::cpu_loss_and_gradient(params, train.images.data(), n, threads, outputs.data(), grad.data(), &dec);
  cae::AtomicOutput out(opt.dump_gradients);
  cae::Hdf5Writer w(out.temp_path(), opt.dump_gradients);
  const cae::Shape image_shape{uint64_t(n), 3, 32, 32};
  w.write("/images", train.images.data(), image_shape);
  w.write("/outputs", outputs.data(), image_shape);
  w.write("/loss", &loss, cae::Shape{1});
  for (int l = 0; l < ae::kNumConvs; ++l) {
    const ae::ConvSpec& c = ae::kConvs[l];
    w.write(std::string("/grad") + c.group + "/weight", grad.data() + ae::weight_offset(l),
            cae::Shape{uint64_t(c.out), uint64_t(c.in), 3, 3});
    w.write(std::string("/grad") + c.group + "/bias", grad.data() + ae::bias_offset(l), cae::Shape{uint64_t(c.out)});
  }
  const uint64_t un = uint64_t(n);
  w.write("/decisions/pool1_argmax", dec.pool1_argmax.data(), cae::Shape{un, 256, 16, 16});
  w.write("/decisions/pool1", dec.pool1.data(), cae::Shape{un, 256, 16, 16});
  w.write("/decisions/pool2_argmax", dec.pool2_argmax.data(), cae::Shape{un, 128, 8, 8});
  w.write("/decisions/pool2", dec.pool2.data(), cae::Shape{un, 128, 8, 8});
  w.write("/decisions/dconv1", dec.dconv1.data(), cae::Shape{un, 128, 8, 8});
  w.write("/decisions/dconv2", dec.dconv2.data(), cae::Shape{un, 256, 16, 16});
  w.close();
  out.commit();
  cae::log_info("wrote %s: loss %.8f over %d images", opt.dump_gradients.c_str(), loss, n);
}

// The --json line; losses are null before the first epoch.
void emit_summary(const cae::CommonOptions& common, const cae::AeCheckpoint& c, const std::string& device) {
  const double none = std::numeric_limits<double>::quiet_NaN();
  cae::emit_json(common, cae::JsonObject()
                             .add("tool", kInfo.name)
                             .add("output", common.output)
                             .add("epochs", c.epochs_done)
                             .add("train_loss", c.train_loss.empty() ? none : c.train_loss.back())
                             .add("test_loss", c.test_loss.empty() ? none : c.test_loss.back())
                             .add("seconds", c.total_seconds)
                             .add("images_per_second", c.images_per_second)
                             .add("device", device)
                             .str());
}

void train(const Options& opt, const cae::CommonOptions& common) {
  if (opt.plateau_factor <= 0.0f) throw cae::UsageError("--lr-plateau-factor must be in (0, 1], not 0");
  if (!std::isfinite(opt.lr) || opt.lr <= 0.0f) throw cae::UsageError("--lr must be a positive finite number");
  const cae::Device device = cae::resolve_device(common.device);
  if (opt.precision == "bf16" && device == cae::Device::cpu)
    throw cae::UsageError("--precision bf16 needs --device gpu (the CPU path computes in fp32)");
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();

  cae::DatasetReader data(opt.data);
  const cae::ImageSplit train_split = data.read("train", opt.train_limit);
  const cae::ImageSplit test_split = data.read("test");
  if (train_split.size() == 0) cae::fail_file(opt.data, "has no training images");
  // A batch larger than the data trains one short batch per epoch: allowed (tiny test
  // runs), but said out loud.
  if (opt.batch_size > train_split.size())
    cae::log_warn("--batch-size %d is larger than the %lld training images: each epoch is one batch of %lld",
                  opt.batch_size, static_cast<long long>(train_split.size()), static_cast<long long>(train_split.size()));
  if (!opt.dump_gradients.empty()) return dump_gradients(opt, common, train_split, threads);

  ae::OptimizerConfig oc;
  oc.kind = opt.optimizer;
  oc.lr = opt.lr;
  oc.momentum = opt.momentum;
  oc.weight_decay = opt.weight_decay;
  oc.grad_clip = opt.grad_clip;
  const ae::Precision precision = opt.precision == "bf16" ? ae::Precision::bf16 : ae::Precision::fp32;
  std::unique_ptr<ae::AeBackend> backend =
      device == cae::Device::gpu ? ae::make_gpu_backend(oc, precision) : ae::make_cpu_backend(oc, threads);

  const cae::InputFile data_input = cae::hash_input(opt.data);
  cae::AeCheckpoint ckpt;
  if (opt.resume && file_exists(common.output)) {
    ckpt = cae::read_ae_checkpoint(common.output);
    check_resumable(ckpt, opt, common.output, train_split.size(), data_input.sha256, cae::device_name(device), threads);
    backend->set_params(ckpt.params);
    backend->set_optimizer_state(ckpt.optimizer);
    cae::log_info("resuming %s after epoch %lld (lr %g)", common.output.c_str(), static_cast<long long>(ckpt.epochs_done),
                  ckpt.lr_current);
  } else {
    if (opt.resume) cae::log_info("no checkpoint at %s yet: starting from scratch", common.output.c_str());
    ckpt.params = ae::init_params(static_cast<uint64_t>(opt.seed));
    backend->set_params(ckpt.params);
    ckpt.optimizer_kind = opt.optimizer;
    ckpt.seed = static_cast<uint64_t>(opt.seed);
    ckpt.batch_size = opt.batch_size;
    ckpt.lr_current = opt.lr;
    ckpt.plateau_best = std::numeric_limits<double>::infinity();
    ckpt.train_count = train_split.size();
    ckpt.data_sha256 = data_input.sha256;
  }
  ckpt.epochs_target = opt.epochs;
  ckpt.test_count = test_split.size();
  ckpt.threads = threads;
  ckpt.device = cae::device_name(device);
  ckpt.precision = ae::precision_name(precision);
  pick_samples(test_split, ckpt);

  const int64_t n = train_split.size();
  cae::log_info("autoencoder: %s parameters; %s training and %s test images; batch %d, %s, lr %g; %s",
                with_commas(ae::kParamCount).c_str(), with_commas(n).c_str(), with_commas(test_split.size()).c_str(),
                opt.batch_size, opt.optimizer.c_str(), ckpt.lr_current, backend->describe().c_str());
  if (ckpt.epochs_done >= opt.epochs && !(ckpt.epochs_done == 0 && opt.epochs == 0)) {
    cae::log_info("%s already has %lld of %d epochs: nothing to do", common.output.c_str(),
                  static_cast<long long>(ckpt.epochs_done), opt.epochs);
    return emit_summary(common, ckpt, backend->describe());
  }
  if (opt.epochs == 0) {  // the initial weights only
    ckpt.sample_reconstructions.resize(ckpt.sample_images.size());
    backend->reconstruct(ckpt.sample_images.data(), int64_t(ckpt.sample_labels.size()), ckpt.sample_reconstructions.data());
    write_checkpoint(ckpt, common, data_input);
    return emit_summary(common, ckpt, backend->describe());
  }
  backend->set_train_images(train_split.images.data(), n);

  for (int epoch = static_cast<int>(ckpt.epochs_done) + 1; epoch <= opt.epochs; ++epoch) {
    const float lr = static_cast<float>(ckpt.lr_current);
    const std::vector<int64_t> order = epoch_order(ckpt.seed, epoch, n);
    cae::Stopwatch clock;
    double train_loss;
    {
      cae::ProgressBar bar(cae::strprintf("epoch %d/%d", epoch, opt.epochs), n, "img");
      train_loss = backend->train_epoch(order, opt.batch_size, lr, [&bar](int64_t done, double loss) {
        bar.update(done, cae::strprintf("loss %.5f", loss));
      });
    }
    const double train_s = clock.seconds();
    const double test_loss =
        test_split.size() > 0 ? backend->eval_loss(test_split.images.data(), test_split.size(), opt.batch_size) : train_loss;
    const double epoch_s = clock.seconds();
    // A non-finite train or test loss means the weights are no longer usable: stop before
    // they replace the last good checkpoint.
    if (!std::isfinite(train_loss) || !std::isfinite(test_loss)) {
      const double bad = std::isfinite(train_loss) ? test_loss : train_loss;
      throw std::runtime_error(cae::strprintf(
          "training diverged in epoch %d (the %s loss became %s); %s. Try a lower --lr or --grad-clip", epoch,
          std::isfinite(train_loss) ? "test" : "train", std::isnan(bad) ? "NaN" : "Inf",
          epoch > 1 ? cae::strprintf("%s keeps epoch %d", common.output.c_str(), epoch - 1).c_str()
                    : "no model was written"));
    }

    ckpt.params = backend->params();
    ckpt.optimizer = backend->optimizer_state();
    ckpt.train_loss.push_back(train_loss);
    ckpt.test_loss.push_back(test_loss);
    ckpt.epoch_seconds.push_back(epoch_s);
    ckpt.lr.push_back(lr);
    ckpt.epochs_done = epoch;
    ckpt.total_seconds += epoch_s;
    ckpt.train_seconds += train_s;
    ckpt.images_per_second = double(n) * double(epoch) / ckpt.train_seconds;
    const bool reduced = plateau_step(test_loss, opt, ckpt);  // the test loss, or the train loss without a test split
    ckpt.sample_reconstructions.resize(ckpt.sample_images.size());
    backend->reconstruct(ckpt.sample_images.data(), int64_t(ckpt.sample_labels.size()), ckpt.sample_reconstructions.data());
    write_checkpoint(ckpt, common, data_input);

    cae::log_info("epoch %d/%d: train loss %.6f, test loss %.6f, %.1f s, %.0f img/s, lr %g", epoch, opt.epochs,
                  train_loss, test_loss, epoch_s, double(n) / train_s, lr);
    if (reduced) cae::log_info("test loss has not improved for %d epochs: lr %g -> %g", opt.plateau_patience + 1, lr,
                               ckpt.lr_current);
  }
  emit_summary(common, ckpt, backend->describe());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  cae::CommonOptions common;
  return cae::run_tool(
      argc, argv, kInfo, common,
      [&](CLI::App& app) {
        app.add_option("--data", opt.data, "cifar10-dataset file (cifar-convert)")->required();
        app.add_option("--epochs", opt.epochs, "Epochs to train (in total, counting those before --resume)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--batch-size", opt.batch_size, "Images per optimizer step")->check(CLI::PositiveNumber);
        app.add_option("--optimizer", opt.optimizer, "adam or sgd")->check(CLI::IsMember({"adam", "sgd"}));
        app.add_option("--lr", opt.lr, "Learning rate")->check(CLI::PositiveNumber);
        app.add_option("--momentum", opt.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
        app.add_option("--weight-decay", opt.weight_decay, "L2 penalty added to the gradient (PyTorch semantics)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--lr-plateau-factor", opt.plateau_factor,
                       "Multiply the lr by this when the test loss stops improving (1 = never)")
            ->check(CLI::Range(0.0, 1.0));
        app.add_option("--lr-plateau-patience", opt.plateau_patience, "Epochs without improvement before reducing the lr")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--grad-clip", opt.grad_clip, "Clip the gradient's global L2 norm to this (0 = off)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--seed", opt.seed, "Seed of the initial weights and of every epoch's shuffle")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--train-limit", opt.train_limit, "Train on the first N training images (0 = all)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--threads", opt.threads, "CPU threads (0 = OMP_NUM_THREADS or all cores)")
            ->check(CLI::NonNegativeNumber);
        app.add_option("--precision", opt.precision, "fp32, or bf16 (GPU only; master weights stay fp32)")
            ->check(CLI::IsMember({"fp32", "bf16"}));
        app.add_flag("--resume", opt.resume,
                     "Continue the run checkpointed in -o (same data and options; the learning rate and its "
                     "schedule continue from the checkpoint)");
        app.add_option("--dump-gradients", opt.dump_gradients)->group("");  // for tests/python/torch_reference.py
      },
      [&] { train(opt, common); });
}
