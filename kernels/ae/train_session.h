// What ae-train does, as a library (the tool only turns options into a TrainRequest):
// read the dataset, build the architecture and the backend (one process, or one rank of a
// data-parallel group), start or --resume from the output file, train with a progress bar
// and a log line per epoch, write the checkpoint after every epoch, and on SIGUSR1/SIGTERM
// save a mid-epoch checkpoint and report the interruption (docs/RELIABILITY.md, "Preemption").
#pragma once
#include <cstdint>
#include <string>

#include "common/device.h"
#include "common/group.h"
#include "kernels/ae/backend.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/trainer.h"

namespace ae {

struct TrainRequest {
  std::string data;                        // image-dataset file
  std::string output;                      // the checkpoint: written every epoch, read by resume
  std::string encoder_channels = "256,128";
  // epochs, batch_size, optimizer, schedule and seed; the rest is filled in here.
  TrainerConfig trainer;
  int64_t train_limit = 0;                 // 0: all training images
  int64_t val_split = -1;                  // -1: a tenth of the training images
  cae::DeviceChoice device = cae::Device::cpu;  // asked beside the read (common/device.h)
  Precision precision = Precision::fp32;
  int threads = 0;                         // 0: OpenMP's default
  bool resume = false;
  bool lr_given = false;                   // --lr was on the command line (a resume says it is not applied)
  cae::GroupOptions group;                 // this process's place in a data-parallel group
};

struct TrainResult {
  Checkpoint checkpoint;      // the state written last (or found finished)
  std::string backend;        // AeBackend::describe()
  bool lead = true;           // rank 0: the process that logs and writes
  bool interrupted = false;   // stopped by SIGUSR1/SIGTERM: exit with kExitInterrupted
};

// Throws cae::UsageError for requests the data or the checkpoint cannot satisfy.
TrainResult run_training(const TrainRequest& request);

// " (3 of 20 epochs)" style description of an unfinished run in `path` ("" when `path` is
// absent, not an ae-model, or finished).
std::string unfinished_run(const std::string& path);

}  // namespace ae
