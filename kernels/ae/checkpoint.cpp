#include "kernels/ae/checkpoint.h"

#include <cmath>

#include "common/error.h"
#include "common/hdf5_io.h"

namespace cae {
namespace {

constexpr uint64_t kImage[] = {3, 32, 32};

Shape weight_shape(int l) {
  const ae::ConvSpec& c = ae::kConvs[l];
  return {uint64_t(c.out), uint64_t(c.in), 3, 3};
}

void check_architecture(const Hdf5Reader& r) {
  r.require_format("ae-model");
  if (!r.has_attr("/", "architecture")) fail_file(r.path(), "has no 'architecture' attribute (not an ae-train model?)");
  const std::string arch = r.attr_string("/", "architecture");
  if (arch != kAeArchitecture)
    fail_file(r.path(), "was trained for another architecture ('" + arch + "'), this toolkit's is '" +
                            std::string(kAeArchitecture) + "'");
}

std::vector<float> read_params(const Hdf5Reader& r) {
  std::vector<float> params(ae::kParamCount);
  for (int l = 0; l < ae::kNumConvs; ++l) {
    const std::string group = ae::kConvs[l].group;
    std::vector<float> w = r.read<float>(group + "/weight", weight_shape(l));
    std::vector<float> b = r.read<float>(group + "/bias", {uint64_t(ae::kConvs[l].out)});
    std::copy(w.begin(), w.end(), params.begin() + ae::weight_offset(l));
    std::copy(b.begin(), b.end(), params.begin() + ae::bias_offset(l));
  }
  for (float v : params)
    if (!std::isfinite(v)) fail_file(r.path(), "weights contain NaN or Inf");
  return params;
}

}  // namespace

void write_ae_checkpoint(const std::string& path, const std::string& display_name, const AeCheckpoint& c,
                         const Provenance& provenance) {
  if (c.params.size() != static_cast<size_t>(ae::kParamCount))
    fail_file(display_name, "internal error: checkpoint has the wrong number of parameters");
  Hdf5Writer w(path, display_name);
  for (int l = 0; l < ae::kNumConvs; ++l) {
    const std::string group = ae::kConvs[l].group;
    w.write(group + "/weight", c.params.data() + ae::weight_offset(l), weight_shape(l));
    w.write(group + "/bias", c.params.data() + ae::bias_offset(l), Shape{uint64_t(ae::kConvs[l].out)});
  }
  w.write("/history/train_loss", c.train_loss);
  w.write("/history/test_loss", c.test_loss);
  w.write("/history/epoch_seconds", c.epoch_seconds);
  w.write("/history/lr", c.lr);

  const uint64_t k = c.sample_labels.size();
  w.write("/samples/images", c.sample_images.data(), Shape{k, kImage[0], kImage[1], kImage[2]});
  w.write("/samples/labels", c.sample_labels.data(), Shape{k});
  w.write("/samples/reconstructions", c.sample_reconstructions.data(), Shape{k, kImage[0], kImage[1], kImage[2]});

  if (!c.optimizer.m.empty()) w.write("/optimizer/m", c.optimizer.m);
  if (!c.optimizer.v.empty()) w.write("/optimizer/v", c.optimizer.v);

  write_provenance(w, provenance);
  w.set_attr("/", "architecture", kAeArchitecture);
  w.set_attr("/", "param_count", int64_t(ae::kParamCount));
  w.set_attr("/", "epochs_done", c.epochs_done);
  w.set_attr("/", "epochs_target", c.epochs_target);
  w.set_attr("/", "seed", static_cast<int64_t>(c.seed));
  w.set_attr("/", "batch_size", c.batch_size);
  w.set_attr("/", "threads", c.threads);
  w.set_attr("/", "optimizer", c.optimizer_kind);
  w.set_attr("/", "optimizer_step", c.optimizer.step);
  w.set_attr("/", "lr_current", c.lr_current);
  w.set_attr("/", "plateau_best", c.plateau_best);
  w.set_attr("/", "plateau_bad_epochs", c.plateau_bad_epochs);
  w.set_attr("/", "device", c.device);
  w.set_attr("/", "precision", c.precision);
  w.set_attr("/", "total_seconds", c.total_seconds);
  w.set_attr("/", "train_seconds", c.train_seconds);
  w.set_attr("/", "images_per_second", c.images_per_second);
  w.set_attr("/", "train_count", c.train_count);
  w.set_attr("/", "test_count", c.test_count);
  w.set_attr("/", "data_sha256", c.data_sha256);
  w.close();
}

AeCheckpoint read_ae_checkpoint(const std::string& path) {
  Hdf5Reader r(path);
  check_architecture(r);
  AeCheckpoint c;
  c.params = read_params(r);

  c.epochs_done = r.attr_int("/", "epochs_done");
  const uint64_t epochs = static_cast<uint64_t>(c.epochs_done);
  if (c.epochs_done < 0) fail_file(path, "epochs_done is negative");
  c.train_loss = r.read<double>("/history/train_loss", {epochs});
  c.test_loss = r.read<double>("/history/test_loss", {epochs});
  c.epoch_seconds = r.read<double>("/history/epoch_seconds", {epochs});
  c.lr = r.read<double>("/history/lr", {epochs});

  Shape s = r.shape("/samples/labels");
  if (s.size() != 1 || s[0] > 10) fail_file(path, "/samples/labels has shape " + shape_str(s) + ", expected [k] with k <= 10");
  c.sample_labels = r.read<uint8_t>("/samples/labels", {s[0]});
  c.sample_images = r.read<uint8_t>("/samples/images", {s[0], kImage[0], kImage[1], kImage[2]});
  c.sample_reconstructions = r.read<float>("/samples/reconstructions", {s[0], kImage[0], kImage[1], kImage[2]});

  c.optimizer_kind = r.attr_string("/", "optimizer");
  c.optimizer.step = r.attr_int("/", "optimizer_step");
  if (r.has("/optimizer/m")) c.optimizer.m = r.read<float>("/optimizer/m", {uint64_t(ae::kParamCount)});
  if (r.has("/optimizer/v")) c.optimizer.v = r.read<float>("/optimizer/v", {uint64_t(ae::kParamCount)});
  if (c.optimizer_kind == "adam" && c.optimizer.step > 0 && (c.optimizer.m.empty() || c.optimizer.v.empty()))
    fail_file(path, "Adam checkpoint lacks /optimizer/m or /optimizer/v");

  c.epochs_target = r.attr_int("/", "epochs_target");
  c.seed = static_cast<uint64_t>(r.attr_int("/", "seed"));
  c.batch_size = r.attr_int("/", "batch_size");
  c.threads = r.attr_int("/", "threads");
  c.lr_current = r.attr_double("/", "lr_current");
  c.plateau_best = r.attr_double("/", "plateau_best");
  c.plateau_bad_epochs = r.attr_int("/", "plateau_bad_epochs");
  c.device = r.attr_string("/", "device");
  c.precision = r.attr_string("/", "precision");
  c.total_seconds = r.attr_double("/", "total_seconds");
  c.train_seconds = r.attr_double("/", "train_seconds");
  c.images_per_second = r.attr_double("/", "images_per_second");
  c.train_count = r.attr_int("/", "train_count");
  c.test_count = r.attr_int("/", "test_count");
  c.data_sha256 = r.attr_string("/", "data_sha256");
  return c;
}

std::vector<float> read_ae_params(const std::string& path) {
  Hdf5Reader r(path);
  check_architecture(r);
  return read_params(r);
}

}  // namespace cae
