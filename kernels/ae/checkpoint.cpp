#include "kernels/ae/checkpoint.h"

#include <cmath>
#include <stdexcept>
#include <tuple>

#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/log.h"

namespace ae {
namespace {

using cae::fail_file;
using cae::Shape;

// Bounds on a recorded architecture, so a damaged file cannot make the reader compute
// overflowing parameter counts: far beyond any model this toolkit trains.
constexpr int64_t kMaxChannels = 1 << 16;
constexpr int64_t kMaxExtent = 1 << 16;
constexpr size_t kMaxDepth = 16;
constexpr uint64_t kMaxSamples = 256;  // one per class, labels are uint8

Shape weight_shape(const ConvLayer& c) { return {uint64_t(c.out), uint64_t(c.in), 3, 3}; }
Shape image_shape(const Architecture& a, uint64_t k) {
  return {k, uint64_t(a.input_channels()), uint64_t(a.height()), uint64_t(a.width())};
}

std::vector<int64_t> to_int64(const std::vector<int>& v) { return {v.begin(), v.end()}; }

std::vector<float> read_params(const cae::Hdf5Reader& r, const Architecture& arch) {
  // Every weight's shape first: only then is arch.param_count() backed by data in the file.
  for (const ConvLayer& c : arch.convs()) {
    r.require(c.group + "/weight", weight_shape(c));
    r.require(c.group + "/bias", {uint64_t(c.out)});
  }
  std::vector<float> params(static_cast<size_t>(arch.param_count()));
  for (const ConvLayer& c : arch.convs()) {
    std::vector<float> w = r.read<float>(c.group + "/weight", weight_shape(c));
    std::vector<float> b = r.read<float>(c.group + "/bias", {uint64_t(c.out)});
    std::copy(w.begin(), w.end(), params.begin() + c.weight_offset);
    std::copy(b.begin(), b.end(), params.begin() + c.bias_offset);
  }
  for (float v : params)
    if (!std::isfinite(v)) fail_file(r.path(), "weights contain NaN or Inf");
  return params;
}

// One training-state attribute: its name, the field that holds it, and for an attribute
// older files lack, the attribute whose presence says the file has it (null: every file).
template <class T>
struct StateAttr {
  const char* key;
  T& field;
  const char* present_if;
};
template <class T>
StateAttr<T> state_attr(const char* key, T& field, const char* present_if = nullptr) {
  return {key, field, present_if};
}

// The training state kept as root attributes, in the order they are written; the writer and
// the reader take this one list. Files written only at epoch boundaries have no position
// inside an epoch; files older than the validation split have no val_count.
template <class Ckpt>
auto state_attrs(Ckpt& c) {
  const char* inside_epoch = "epoch_images_done";
  return std::make_tuple(
      state_attr("epochs_done", c.epochs_done), state_attr("epochs_target", c.epochs_target),
      state_attr("epoch_images_done", c.epoch_images_done, inside_epoch),
      state_attr("epoch_loss_sum", c.epoch_loss_sum, inside_epoch),
      state_attr("epoch_train_seconds", c.epoch_train_seconds, inside_epoch), state_attr("seed", c.seed),
      state_attr("batch_size", c.batch_size), state_attr("threads", c.threads),
      state_attr("optimizer", c.optimizer_kind), state_attr("optimizer_step", c.optimizer.step),
      state_attr("lr_current", c.lr_current), state_attr("plateau_best", c.plateau_best),
      state_attr("plateau_bad_epochs", c.plateau_bad_epochs), state_attr("device", c.device),
      state_attr("precision", c.precision), state_attr("total_seconds", c.total_seconds),
      state_attr("train_seconds", c.train_seconds), state_attr("images_per_second", c.images_per_second),
      state_attr("train_count", c.train_count), state_attr("val_count", c.val_count, "val_count"),
      state_attr("test_count", c.test_count), state_attr("data_sha256", c.data_sha256));
}

// visit(key, field, present_if) for each state attribute in order.
template <class Ckpt, class Visit>
void for_each_state_attr(Ckpt& c, Visit&& visit) {
  std::apply([&](const auto&... a) { (visit(a.key, a.field, a.present_if), ...); }, state_attrs(c));
}

// One root attribute of each type the state has (the seed is stored as a signed integer).
void write_attr(cae::Hdf5Writer& w, const char* key, uint64_t v) { w.set_attr("/", key, static_cast<int64_t>(v)); }
template <class T>
void write_attr(cae::Hdf5Writer& w, const char* key, const T& v) {
  w.set_attr("/", key, v);
}
void read_attr(const cae::Hdf5Reader& r, const char* key, uint64_t& v) { v = static_cast<uint64_t>(r.attr_int("/", key)); }
void read_attr(const cae::Hdf5Reader& r, const char* key, int64_t& v) { v = r.attr_int("/", key); }
void read_attr(const cae::Hdf5Reader& r, const char* key, double& v) { v = r.attr_double("/", key); }
void read_attr(const cae::Hdf5Reader& r, const char* key, std::string& v) { v = r.attr_string("/", key); }

}  // namespace

Architecture read_architecture(const cae::Hdf5Reader& r) {
  r.require_format("ae-model", "ae-train");
  if (!r.has_attr("/", "architecture")) fail_file(r.path(), "has no 'architecture' attribute (not an ae-train model?)");
  const std::string family = r.attr_string("/", "architecture");
  const bool has_channels = r.has_attr("/", "encoder_channels"), has_shape = r.has_attr("/", "input_shape");
  if (!has_channels && !has_shape) {
    // Written before the architecture was data: the seed model, named by its full string.
    if (family != kSeedArchitectureString)
      fail_file(r.path(), "was trained for another architecture ('" + family + "'), this toolkit's is '" +
                              std::string(kArchitectureFamily) + "'");
    return Architecture::seed();
  }
  if (family.compare(0, std::string(kArchitectureFamily).size(), kArchitectureFamily) != 0)
    fail_file(r.path(), "was trained for another architecture ('" + family + "'), this toolkit's is '" +
                            std::string(kArchitectureFamily) + "'");
  if (!has_channels || !has_shape)
    fail_file(r.path(), std::string("has ") + (has_channels ? "encoder_channels but no input_shape" : "input_shape but no encoder_channels"));
  const std::vector<int64_t> channels = r.attr_ints("/", "encoder_channels");
  const std::vector<int64_t> shape = r.attr_ints("/", "input_shape");
  if (shape.size() != 3) fail_file(r.path(), "input_shape has " + std::to_string(shape.size()) + " values, expected [C,H,W]");
  for (int64_t v : shape)
    if (v < 1 || v > kMaxExtent) fail_file(r.path(), "input_shape " + std::to_string(v) + " is not in 1..65536");
  if (channels.empty() || channels.size() > kMaxDepth)
    fail_file(r.path(), "encoder_channels has " + std::to_string(channels.size()) + " values, expected 1 to 16");
  for (int64_t v : channels)
    if (v < 1 || v > kMaxChannels) fail_file(r.path(), "encoder_channels " + std::to_string(v) + " is not in 1..65536");
  try {
    return Architecture(int(shape[0]), int(shape[1]), int(shape[2]), std::vector<int>(channels.begin(), channels.end()));
  } catch (const std::invalid_argument& e) {
    fail_file(r.path(), std::string("records an impossible architecture: ") + e.what());
  }
}

void write_checkpoint(const std::string& path, const std::string& display_name, const Checkpoint& c,
                      const cae::Provenance& provenance) {
  const Architecture& a = c.arch;
  const uint64_t k = c.sample_labels.size();
  if (c.params.size() != static_cast<size_t>(a.param_count()) ||
      c.sample_images.size() != k * uint64_t(a.image_dim()) || c.sample_reconstructions.size() != k * uint64_t(a.image_dim()))
    fail_file(display_name, "internal error: checkpoint does not match its architecture");
  cae::Hdf5Writer w(path, display_name);
  for (const ConvLayer& l : a.convs()) {
    w.write(l.group + "/weight", c.params.data() + l.weight_offset, weight_shape(l));
    w.write(l.group + "/bias", c.params.data() + l.bias_offset, Shape{uint64_t(l.out)});
  }
  w.write("/history/train_loss", c.train_loss);
  w.write("/history/val_loss", c.val_loss);
  w.write("/history/test_loss", c.test_loss);
  w.write("/history/epoch_seconds", c.epoch_seconds);
  w.write("/history/lr", c.lr);

  w.write("/samples/images", c.sample_images.data(), image_shape(a, k));
  w.write("/samples/labels", c.sample_labels.data(), Shape{k});
  w.write("/samples/reconstructions", c.sample_reconstructions.data(), image_shape(a, k));

  if (!c.optimizer.m.empty()) w.write("/optimizer/m", c.optimizer.m);
  if (!c.optimizer.v.empty()) w.write("/optimizer/v", c.optimizer.v);

  write_provenance(w, provenance);
  w.set_attr("/", "architecture", std::string(kArchitectureFamily) + ": " + a.describe());
  w.set_attr("/", "encoder_channels", to_int64(a.encoder_channels()));
  w.set_attr("/", "input_shape", std::vector<int64_t>{a.input_channels(), a.height(), a.width()});
  w.set_attr("/", "latent_shape", std::vector<int64_t>{a.latent_channels(), a.latent_height(), a.latent_width()});
  w.set_attr("/", "param_count", a.param_count());
  for_each_state_attr(c, [&](const char* key, const auto& value, const char*) { write_attr(w, key, value); });
  w.close();
}

Checkpoint read_checkpoint(const std::string& path) {
  cae::Hdf5Reader r(path);
  Checkpoint c;
  c.arch = read_architecture(r);
  c.params = read_params(r, c.arch);
  const uint64_t params = uint64_t(c.arch.param_count());

  for_each_state_attr(c, [&](const char* key, auto& value, const char* present_if) {
    if (!present_if || r.has_attr("/", present_if)) read_attr(r, key, value);
  });
  if (c.epochs_done < 0) fail_file(path, "epochs_done is negative");
  const uint64_t epochs = static_cast<uint64_t>(c.epochs_done);
  c.train_loss = r.read<double>("/history/train_loss", {epochs});
  c.test_loss = r.read<double>("/history/test_loss", {epochs});
  c.epoch_seconds = r.read<double>("/history/epoch_seconds", {epochs});
  c.lr = r.read<double>("/history/lr", {epochs});
  // Files older than the validation split have no val_loss: no epoch had a validation set.
  c.val_loss = r.has("/history/val_loss") ? r.read<double>("/history/val_loss", {epochs})
                                          : std::vector<double>(epochs, std::numeric_limits<double>::quiet_NaN());

  const Shape s = r.shape("/samples/labels");
  if (s.size() != 1 || s[0] > kMaxSamples)
    fail_file(path, "/samples/labels has shape " + cae::shape_str(s) + ", expected [k] with k <= 256");
  c.sample_labels = r.read<uint8_t>("/samples/labels", {s[0]});
  c.sample_images = r.read<uint8_t>("/samples/images", image_shape(c.arch, s[0]));
  c.sample_reconstructions = r.read<float>("/samples/reconstructions", image_shape(c.arch, s[0]));

  if (r.has("/optimizer/m")) c.optimizer.m = r.read<float>("/optimizer/m", {params});
  if (r.has("/optimizer/v")) c.optimizer.v = r.read<float>("/optimizer/v", {params});
  if (c.optimizer_kind == "adam" && c.optimizer.step > 0 && (c.optimizer.m.empty() || c.optimizer.v.empty()))
    fail_file(path, "Adam checkpoint lacks /optimizer/m or /optimizer/v");

  validate_training_state(c, path);
  return c;
}

// The numbers --resume continues with stand for command-line values (--lr, --batch-size,
// ...) or follow from them; a damaged or hand-edited file must not slip past the checks
// the options get. A negative stored rate once trained a whole epoch backwards and
// overwrote the checkpoint with exit 0.
void validate_training_state(const Checkpoint& c, const std::string& path) {
  auto bad = [&](const std::string& what) { fail_file(path, what + " (corrupted or edited checkpoint?)"); };
  if (c.optimizer_kind != "adam" && c.optimizer_kind != "sgd") bad("optimizer '" + c.optimizer_kind + "' is not adam or sgd");
  if (!std::isfinite(c.lr_current) || c.lr_current <= 0) bad(cae::strprintf("lr_current %g is not a positive finite learning rate", c.lr_current));
  for (double lr : c.lr)
    if (!std::isfinite(lr) || lr <= 0) bad(cae::strprintf("/history/lr holds %g, not a positive finite learning rate", lr));
  if (c.batch_size < 1) bad("batch_size " + std::to_string(c.batch_size) + " is not positive");
  if (c.train_count < 1) bad("train_count " + std::to_string(c.train_count) + " is not positive");
  if (c.val_count < 0 || c.test_count < 0) bad("val_count or test_count is negative");
  if (c.threads < 0 || c.threads > (1 << 20)) bad("threads " + std::to_string(c.threads) + " is out of range");
  if (c.epochs_target < 0) bad("epochs_target is negative");
  if (c.plateau_bad_epochs < 0) bad("plateau_bad_epochs is negative");
  if (std::isnan(c.plateau_best) || c.plateau_best < 0) bad(cae::strprintf("plateau_best %g is not a loss", c.plateau_best));
  // An interrupted epoch stopped between steps: a whole number of batches, short of the end.
  if (c.epoch_images_done < 0 || c.epoch_images_done >= c.train_count || c.epoch_images_done % c.batch_size != 0)
    bad("epoch_images_done " + std::to_string(c.epoch_images_done) + " is not a step boundary inside an epoch of " +
        std::to_string(c.train_count) + " images");
  if (!std::isfinite(c.epoch_loss_sum) || c.epoch_loss_sum < 0 || (c.epoch_images_done == 0 && c.epoch_loss_sum != 0))
    bad(cae::strprintf("epoch_loss_sum %g does not fit epoch_images_done", c.epoch_loss_sum));
  // Adam's bias correction divides by 1 - beta^step: the step counts the batches trained
  // so far (one per batch of every finished epoch, and those of an interrupted one), so it
  // is positive once anything was trained and never more than that count.
  const int64_t batches = (c.train_count + c.batch_size - 1) / c.batch_size;
  const int64_t trained = c.epochs_done * batches + c.epoch_images_done / c.batch_size;
  if (c.optimizer.step < 0 || c.optimizer.step > trained || (trained > 0 && c.optimizer.step == 0))
    bad("optimizer_step " + std::to_string(c.optimizer.step) + " does not fit " + std::to_string(c.epochs_done) +
        " epochs of " + std::to_string(batches) + " batches and " + std::to_string(c.epoch_images_done / c.batch_size) +
        " more");
  for (float m : c.optimizer.m)
    if (!std::isfinite(m)) bad("/optimizer/m contains NaN or Inf");
  for (float v : c.optimizer.v)
    if (!std::isfinite(v) || v < 0) bad("/optimizer/v contains a negative, NaN or Inf second moment");
  for (double t : {c.total_seconds, c.train_seconds, c.images_per_second, c.epoch_train_seconds})
    if (!std::isfinite(t) || t < 0) bad("a recorded time or rate is negative or not finite");
}

ModelWeights read_ae_params(const std::string& path) {
  cae::Hdf5Reader r(path);
  ModelWeights m;
  m.arch = read_architecture(r);
  m.params = read_params(r, m.arch);
  return m;
}

}  // namespace ae
