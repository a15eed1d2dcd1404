// What ae-encode does, as a library (the tool only turns options into an EncodeRequest):
// open the dataset and the model, start the encoder on its device (one process, or one rank
// of a group encoding its share of every split's batches), stream every split chunk by chunk
// through ae::EncodePipeline into the features file (docs/FORMATS.md, "ae-features"), which
// the group's rank 0 alone writes, with the views of a cae::ViewSet (--flip, --shifts).
#pragma once
#include <cstdint>
#include <string>

#include "common/group.h"

namespace ae {

struct EncodeRequest {
  std::string model;                // ae-model file
  std::string data;                 // image-dataset file
  std::string output;               // the features file (rank 0 writes it, atomically)
  std::string device = "auto";      // --device: auto, cpu or gpu
  int batch_size = 256;
  std::string splits = "train,test";  // comma-separated; each train or test, once
  int threads = 0;                  // 0: OpenMP's default
  bool flip = false;
  int shifts = 0;
  bool float32 = false;             // store the codes as float32 (default float16)
  cae::GroupOptions group;          // --gpus / this process's place in a group
};

struct EncodeResult {
  bool lead = true;       // rank 0, which wrote the file (the other fields are its); false also after a launch
  int64_t images = 0;     // over every split, per view
  std::string views;      // cae::ViewSet::spec()
  int64_t features = 0;   // latent_dim
  double seconds = 0, images_per_second = 0;
  std::string device;     // Encoder::describe()
  double io_read_seconds = 0, io_write_seconds = 0;  // the pipeline's I/O thread
};

// Throws cae::UsageError for a bad split list; "<file>: <problem>" for inputs the model cannot encode.
EncodeResult run_encoding(const EncodeRequest& request);

}  // namespace ae
