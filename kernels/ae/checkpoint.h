// The autoencoder's model file (format "ae-model", docs/FORMATS.md): the architecture
// (root attributes encoder_channels and input_shape), weights in PyTorch layout, training
// history, sample reconstructions, and everything `ae-train --resume` needs to continue
// bit-identically (optimizer moments and step, learning-rate schedule state, the
// validation split). ae-train writes it after every epoch; ae-encode reads its weights.
//
// A file without encoder_channels/input_shape was written before the architecture was
// data: it is the seed model (Architecture::seed()) and reads as one.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/provenance.h"
#include "kernels/ae/backend.h"
#include "kernels/ae/model.h"

namespace ae {

// The root `architecture` string names the family; the layer shapes come from
// encoder_channels and input_shape. Files written before issue 14 carry exactly
// kSeedArchitectureString and no shape attributes.
inline constexpr const char* kArchitectureFamily = "conv-ae";
inline constexpr const char* kSeedArchitectureString =
    "conv-ae-v1: conv3x3 3>256 relu, maxpool2, conv3x3 256>128 relu, maxpool2 | "
    "conv3x3 128>128 relu, up2, conv3x3 128>256 relu, up2, conv3x3 256>3";

struct Checkpoint {
  Architecture arch = Architecture::seed();
  std::vector<float> params;     // arch.param_count(), flat (kernels/ae/model.h layout)
  OptimizerState optimizer;      // step, m, v (m/v empty when unused)
  std::string optimizer_kind;    // "adam" | "sgd"

  // One value per finished epoch. val_loss is NaN for epochs trained without a
  // validation set (val_count == 0, and every epoch of files older than issue 14).
  std::vector<double> train_loss, val_loss, test_loss, epoch_seconds, lr;

  // The first test image of each class (k <= 256 of them) and their reconstructions.
  std::vector<uint8_t> sample_images;         // [k,C,H,W]
  std::vector<uint8_t> sample_labels;         // [k]
  std::vector<float> sample_reconstructions;  // [k,C,H,W]

  int64_t epochs_done = 0, epochs_target = 0;
  // A run interrupted inside epoch epochs_done + 1 (ae-train on SIGUSR1/SIGTERM) records how
  // far it got: the images of that epoch's order already trained (a whole number of
  // steps), the sum of their per-image MSE and the seconds spent on them. All 0 at an
  // epoch boundary. The order itself is not stored: epoch_order(seed, epoch) recomputes it.
  int64_t epoch_images_done = 0;
  double epoch_loss_sum = 0.0;
  double epoch_train_seconds = 0.0;
  uint64_t seed = 0;
  int64_t batch_size = 0;
  int64_t threads = 0;          // CPU threads of the run (bit-identical resume needs the same)
  double lr_current = 0.0;
  double plateau_best = std::numeric_limits<double>::infinity();  // best monitored loss so far
  int64_t plateau_bad_epochs = 0;
  std::string device = "cpu", precision = "fp32";
  double total_seconds = 0.0;   // all epochs, including those before a --resume
  double train_seconds = 0.0;   // time inside the training passes only
  double images_per_second = 0.0;  // training images per second over all epochs
  int64_t train_count = 0;      // images trained on (the file's training split less val_count)
  int64_t val_count = 0;        // training images held out as the validation set (--val-split)
  int64_t test_count = 0;
  std::string data_sha256;      // dataset trained on (checked by --resume)
};

// Writes the whole checkpoint to `path` (normally AtomicOutput::temp_path()); messages
// name `display_name`.
void write_checkpoint(const std::string& path, const std::string& display_name, const Checkpoint& ckpt,
                      const cae::Provenance& provenance);

// Reads and validates a checkpoint: format, architecture, every dataset's dtype and shape
// against that architecture. Errors name the file:
// "model.h5: /encoder/conv1/weight has shape [..], expected [..]".
// The training state (learning rate and its history, optimizer step and moments, batch
// size, counts, schedule state) is validated like the options it stands for
// (validate_training_state).
Checkpoint read_checkpoint(const std::string& path);

// Throws "<path>: <field> ... (corrupted or edited checkpoint?)" unless every number that
// --resume continues with is one the command line could have produced.
void validate_training_state(const Checkpoint& ckpt, const std::string& path);

// Only the architecture and the weights (what ae-encode needs), validated the same way.
struct ModelWeights {
  Architecture arch = Architecture::seed();
  std::vector<float> params;
};
ModelWeights read_ae_params(const std::string& path);

// The architecture a model file records (the seed model for files without one).
Architecture read_architecture(const cae::Hdf5Reader& file);

}  // namespace ae
