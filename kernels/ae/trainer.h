// The training loop of ae-train, as a library: the validation hold-out, a seeded shuffle
// per epoch, the ReduceLROnPlateau schedule on the validation loss, resume checks, the
// divergence stop, and a Checkpoint after every epoch handed to the caller to save.
//
//   ae::Trainer trainer(config, *backend, train_split, test_split, data_sha256);
//   trainer.start();                      // or trainer.resume(ae::read_checkpoint(path));
//   if (!trainer.run(save_and_log, draw_progress, nullptr, stop_requested)) save(trainer.checkpoint());
//
// A run can be stopped between steps (preemption): run() then returns false with a
// checkpoint that records the position inside the epoch, and a resume from it continues
// to exactly the weights of an uninterrupted run (docs/RELIABILITY.md, "Preemption").
//
// Which data steers what: the optimizer sees the training images less the validation
// hold-out; the learning-rate schedule reads the validation loss (the training loss when
// there is no hold-out); the test loss is only recorded, never acted on.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/dataset.h"
#include "kernels/ae/backend.h"
#include "kernels/ae/checkpoint.h"

namespace ae {

struct TrainerConfig {
  int epochs = 20;                 // in total, counting those before a resume
  int batch_size = 64;
  OptimizerConfig optimizer;       // optimizer.lr is the initial learning rate
  float plateau_factor = 0.5f;     // ReduceLROnPlateau factor (1 = never reduce)
  int plateau_patience = 2;
  uint64_t seed = 1;               // initial weights and every epoch's shuffle
  int64_t val_split = 0;           // training images held out for validation
  std::string device = "cpu";      // recorded in the checkpoint; a resume on another warns
  std::string precision = "fp32";
  int threads = 1;                 // CPU threads (recorded: bit-identical resume needs the same)
  int ranks = 1;                   // data-parallel ranks: a step trains batch_size·ranks images
  std::string output_name = "model.h5";  // named in messages ("... keeps epoch 3")
};

// ---- the pieces, exposed for tests ----------------------------------------------------

// The visiting order of epoch `epoch` (1-based) over n images: a Fisher–Yates shuffle
// seeded from (seed, epoch) only, so a resumed run shuffles exactly like an uninterrupted
// one. std::seed_seq and mt19937_64 are fully specified, unlike std::shuffle.
std::vector<int64_t> epoch_order(uint64_t seed, int epoch, int64_t n);

// The validation hold-out: a shuffle of rows 0..n-1 with the fixed seed
// kValidationSplitSeed (not --seed: every model trained on one dataset with one
// --val-split is validated on the same images), whose last n_val rows are the validation
// set. Both lists come back ascending, so the training images keep the file's order and
// n_val = 0 trains on exactly the rows (and in exactly the order) it did before the split.
inline constexpr uint64_t kValidationSplitSeed = 20240214;
struct SplitRows {
  std::vector<int64_t> train, val;
};
SplitRows validation_rows(int64_t n, int64_t n_val);
// The images and labels of `rows` of s, in that order.
cae::ImageSplit take_rows(const cae::ImageSplit& s, const std::vector<int64_t>& rows);

// torch.optim.lr_scheduler.ReduceLROnPlateau(mode="min", threshold=1e-4 relative,
// cooldown=0, min_lr=0, eps=1e-8) over the state kept in the checkpoint (lr_current,
// plateau_best, plateau_bad_epochs). Returns true when the rate was reduced.
bool plateau_step(double monitored, float factor, int patience, Checkpoint& c);

// The first image of each class in `test` (classes ascending) as the checkpoint's samples.
void pick_samples(const cae::ImageSplit& test, Checkpoint& c);

// What one finished epoch reports to the caller.
struct EpochResult {
  int epoch = 0, epochs = 0;
  double train_loss = 0, val_loss = 0, test_loss = 0;  // val_loss NaN without a hold-out
  double seconds = 0, train_seconds = 0;
  double lr = 0;             // the rate this epoch trained at
  bool lr_reduced = false;   // the schedule lowered the rate for the next epoch
  bool monitors_val = false; // the schedule read the validation loss (else the training loss)
};

class Trainer {
 public:
  // Called during an epoch (from the backend's progress callback).
  using Progress = std::function<void(int epoch, int64_t images_done, int64_t images_total, double running_loss)>;
  // Called after each epoch with the checkpoint to save (it must be written before run()
  // continues, so a kill never loses more than the epoch in flight).
  using EpochDone = std::function<void(const Checkpoint& checkpoint, const EpochResult& result)>;
  // Called before (images_done 0) and after (images_done == images_total) each evaluation
  // pass of an epoch; `split` is "validation" or "test".
  using EvalProgress = std::function<void(int epoch, const char* split, int64_t images_done, int64_t images_total)>;
  // Asked before every backend call (AeBackend::steps_per_call steps): true stops the run
  // there.
  using StopRequested = std::function<bool()>;

  // `train` is the file's training split (any --train-limit applied); the validation
  // hold-out is taken from it here. Throws cae::UsageError when config.val_split leaves
  // no training image, and std::invalid_argument when the images are not the backend's shape.
  // Both splits are taken by value: pass them with std::move to avoid a copy.
  Trainer(TrainerConfig config, AeBackend& backend, cae::ImageSplit train, cae::ImageSplit test,
          std::string data_sha256);

  // Starts from the seeded initial weights.
  void start();
  // Continues `c` (read from config.output_name): throws cae::UsageError unless it was
  // trained on the same data (sha256, image count, hold-out) with the same architecture,
  // seed, batch size and optimizer.
  void resume(Checkpoint c);

  bool finished() const;  // the checkpoint already has config.epochs epochs
  // Trains the remaining epochs; returns true when they are done. When `stop` answers
  // true (on any rank of a group: AeBackend::any_rank), returns false after the step in
  // progress, with checkpoint() holding the weights, optimizer state and the position in
  // the epoch, ready to save. Throws std::runtime_error when a loss becomes NaN/Inf
  // (before that epoch's weights reach on_epoch).
  bool run(const EpochDone& on_epoch, const Progress& on_progress = nullptr, const EvalProgress& on_eval = nullptr,
           const StopRequested& stop = nullptr);
  // Recomputes the sample reconstructions with the backend's current weights.
  void reconstruct_samples();

  const Checkpoint& checkpoint() const { return ckpt_; }
  const TrainerConfig& config() const { return cfg_; }
  int64_t train_count() const { return train_.size(); }
  int64_t val_count() const { return val_.size(); }
  int64_t test_count() const { return test_.size(); }

 private:
  void set_run_fields();
  bool train_rest_of_epoch(int epoch, const std::vector<int64_t>& order, const Progress& on_progress,
                           const StopRequested& stop);
  void take_backend_state();
  void check_resumable(const Checkpoint& c) const;
  TrainerConfig cfg_;
  AeBackend& backend_;
  cae::ImageSplit train_, val_, test_;
  std::string data_sha256_;
  Checkpoint ckpt_;
};

}  // namespace ae
