// The autoencoder's model file (format "ae-model", docs/FORMATS.md): weights in PyTorch
// layout, training history, sample reconstructions, and everything `ae-train --resume`
// needs to continue bit-identically (optimizer moments and step, learning-rate schedule
// state). ae-train writes it after every epoch; ae-encode reads its weights.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/provenance.h"
#include "kernels/ae/model.h"

namespace cae {

// Names the layer sequence, so a file from another architecture is refused by name.
inline constexpr const char* kAeArchitecture =
    "conv-ae-v1: conv3x3 3>256 relu, maxpool2, conv3x3 256>128 relu, maxpool2 | "
    "conv3x3 128>128 relu, up2, conv3x3 128>256 relu, up2, conv3x3 256>3";

struct AeCheckpoint {
  std::vector<float> params;     // ae::kParamCount, flat (kernels/ae/model.h layout)
  ae::OptimizerState optimizer;  // step, m, v (m/v empty when unused)
  std::string optimizer_kind;    // "adam" | "sgd"

  // One value per finished epoch.
  std::vector<double> train_loss, test_loss, epoch_seconds, lr;

  // The first test image of each class (k <= 10 of them) and their reconstructions.
  std::vector<uint8_t> sample_images;         // [k,3,32,32]
  std::vector<uint8_t> sample_labels;         // [k]
  std::vector<float> sample_reconstructions;  // [k,3,32,32]

  int64_t epochs_done = 0, epochs_target = 0;
  uint64_t seed = 0;
  int64_t batch_size = 0;
  int64_t threads = 0;          // CPU threads of the run (bit-identical resume needs the same)
  double lr_current = 0.0;
  double plateau_best = 0.0;    // best monitored loss so far (+inf before the first epoch)
  int64_t plateau_bad_epochs = 0;
  std::string device = "cpu", precision = "fp32";
  double total_seconds = 0.0;   // all epochs, including those before a --resume
  double train_seconds = 0.0;   // time inside the training passes only
  double images_per_second = 0.0;  // training images per second over all epochs
  int64_t train_count = 0, test_count = 0;
  std::string data_sha256;      // dataset trained on (checked by --resume)
};

// Writes the whole checkpoint to `path` (normally AtomicOutput::temp_path()); messages
// name `display_name`.
void write_ae_checkpoint(const std::string& path, const std::string& display_name, const AeCheckpoint& ckpt,
                         const Provenance& provenance);

// Reads and validates a checkpoint: format, architecture, every dataset's dtype and shape.
// Errors name the file: "model.h5: /encoder/conv1/weight has shape [..], expected [..]".
AeCheckpoint read_ae_checkpoint(const std::string& path);

// Only the weights (what ae-encode needs), validated the same way.
std::vector<float> read_ae_params(const std::string& path);

}  // namespace cae
