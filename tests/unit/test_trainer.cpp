// ae::Trainer (kernels/ae/trainer.h): the shuffle, the validation hold-out, the plateau
// schedule, resume checks and the loop itself, on the CPU backend with tiny architectures.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "common/error.h"
#include "common/log.h"
#include "kernels/ae/checkpoint.h"
#include "common/stop_signal.h"
#include "kernels/ae/trainer.h"

namespace {

using ae::Architecture;

cae::ImageSplit random_split(int64_t n, int C, int H, int W, uint64_t seed, int classes = 3) {
  cae::ImageSplit s;
  s.C = C, s.H = H, s.W = W;
  std::mt19937_64 rng(seed);
  s.images.resize(size_t(n) * C * H * W);
  for (auto& p : s.images) p = uint8_t(rng() & 255);
  for (int64_t i = 0; i < n; ++i) s.labels.push_back(uint8_t(i % classes));
  return s;
}

ae::TrainerConfig tiny_config(int epochs, int64_t val_split) {
  ae::TrainerConfig c;
  c.epochs = epochs;
  c.batch_size = 4;
  c.seed = 5;
  c.val_split = val_split;
  c.threads = 1;
  c.output_name = "m.h5";
  return c;
}

struct TrainedRun {
  std::vector<ae::Checkpoint> saved;  // one per epoch, as the tool would write them
  std::vector<ae::EpochResult> results;
};

// Trains `epochs` on a fresh backend, from scratch or from `from`.
TrainedRun train(const Architecture& arch, const ae::TrainerConfig& cfg, const ae::Checkpoint* from = nullptr) {
  auto backend = ae::make_cpu_backend(arch, cfg.optimizer, 1);
  ae::Trainer t(cfg, *backend, random_split(24, arch.input_channels(), arch.height(), arch.width(), 1),
                random_split(6, arch.input_channels(), arch.height(), arch.width(), 2), "sha");
  if (from)
    t.resume(*from);
  else
    t.start();
  TrainedRun r;
  t.run([&](const ae::Checkpoint& c, const ae::EpochResult& e) { r.saved.push_back(c), r.results.push_back(e); });
  return r;
}

class TrainerTest : public testing::Test {
 protected:
  // Resume warnings would clutter the test log; the quiet setting is global, so restore it.
  void SetUp() override { was_quiet_ = cae::is_quiet(), cae::set_quiet(true); }
  void TearDown() override { cae::set_quiet(was_quiet_); }
  bool was_quiet_ = false;
};

TEST_F(TrainerTest, EpochOrderIsASeededPermutation) {
  const auto a = ae::epoch_order(7, 1, 100);
  EXPECT_EQ(a, ae::epoch_order(7, 1, 100));  // deterministic: a resumed run shuffles alike
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(100);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, iota);
  EXPECT_NE(a, ae::epoch_order(7, 2, 100));  // another epoch
  EXPECT_NE(a, ae::epoch_order(8, 1, 100));  // another seed
  EXPECT_TRUE(ae::epoch_order(7, 1, 0).empty());
}

TEST_F(TrainerTest, ValidationRowsAreFixedDisjointAndAscending) {
  const ae::SplitRows r = ae::validation_rows(1000, 100);
  ASSERT_EQ(r.train.size(), 900u);
  ASSERT_EQ(r.val.size(), 100u);
  EXPECT_TRUE(std::is_sorted(r.train.begin(), r.train.end()));
  EXPECT_TRUE(std::is_sorted(r.val.begin(), r.val.end()));
  std::set<int64_t> all(r.train.begin(), r.train.end());
  all.insert(r.val.begin(), r.val.end());
  EXPECT_EQ(all.size(), 1000u);
  EXPECT_EQ(*all.rbegin(), 999);
  // Not the tail of the file: the hold-out is spread over it.
  EXPECT_LT(r.val.front(), 100);
  // The same rows every time (no --seed involved), the last n_val of one fixed shuffle.
  const auto order = ae::epoch_order(ae::kValidationSplitSeed, 0, 1000);
  std::vector<int64_t> tail(order.end() - 100, order.end());
  std::sort(tail.begin(), tail.end());
  EXPECT_EQ(tail, r.val);
  // No hold-out: every row, in order.
  const ae::SplitRows none = ae::validation_rows(10, 0);
  EXPECT_EQ(none.train, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_TRUE(none.val.empty());
  EXPECT_THROW(ae::validation_rows(10, 11), std::invalid_argument);
}

TEST_F(TrainerTest, TakeRowsCopiesImagesAndLabels) {
  const cae::ImageSplit s = random_split(5, 2, 2, 2, 3);
  const cae::ImageSplit t = ae::take_rows(s, {4, 1});
  ASSERT_EQ(t.size(), 2);
  EXPECT_EQ(t.C, 2);
  EXPECT_TRUE(std::equal(t.image(0), t.image(0) + 8, s.image(4)));
  EXPECT_TRUE(std::equal(t.image(1), t.image(1) + 8, s.image(1)));
  EXPECT_EQ(t.labels[0], s.labels[4]);
  // Enough rows for every thread of the parallel copy: the hold-out's two halves, row by row.
  const cae::ImageSplit big = random_split(3000, 3, 4, 4, 9, 10);
  const ae::SplitRows rows = ae::validation_rows(big.size(), 700);
  for (const std::vector<int64_t>* picked : {&rows.train, &rows.val}) {
    const cae::ImageSplit part = ae::take_rows(big, *picked);
    ASSERT_EQ(part.size(), int64_t(picked->size()));
    for (size_t i = 0; i < picked->size(); ++i) {
      ASSERT_TRUE(std::equal(part.image(int64_t(i)), part.image(int64_t(i)) + 48, big.image((*picked)[i]))) << i;
      ASSERT_EQ(part.labels[i], big.labels[size_t((*picked)[i])]) << i;
    }
  }
}

// ReduceLROnPlateau(factor 0.5, patience 2, threshold 1e-4 rel): the rate halves on the
// third epoch in a row without a 1e-4 relative improvement, and the count restarts.
TEST_F(TrainerTest, PlateauScheduleFollowsPyTorch) {
  ae::Checkpoint c;
  c.lr_current = 1e-3;
  const double losses[] = {1.0, 0.9, 0.89995, 0.9, 0.95, 0.5, 0.6, 0.6, 0.6, 0.6};
  const bool reduce[] = {false, false, false, false, true, false, false, false, true, false};
  const double lr_after[] = {1e-3, 1e-3, 1e-3, 1e-3, 5e-4, 5e-4, 5e-4, 5e-4, 2.5e-4, 2.5e-4};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(ae::plateau_step(losses[i], 0.5f, 2, c), reduce[i]) << "epoch " << i + 1;
    EXPECT_DOUBLE_EQ(c.lr_current, lr_after[i]) << "epoch " << i + 1;
  }
  EXPECT_DOUBLE_EQ(c.plateau_best, 0.5);
  // Factor 1 never reduces; neither does a reduction smaller than eps = 1e-8.
  ae::Checkpoint d;
  d.lr_current = 1e-9;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(ae::plateau_step(1.0, 0.5f, 0, d));
  EXPECT_DOUBLE_EQ(d.lr_current, 1e-9);
}

TEST_F(TrainerTest, ValidationLossSteersTheScheduleAndIsRecorded) {
  const Architecture arch(1, 4, 4, {2});
  const TrainedRun r = train(arch, tiny_config(3, 6));
  ASSERT_EQ(r.saved.size(), 3u);
  const ae::Checkpoint& c = r.saved.back();
  EXPECT_EQ(c.train_count, 18);
  EXPECT_EQ(c.val_count, 6);
  EXPECT_EQ(c.test_count, 6);
  EXPECT_EQ(c.optimizer.step, 3 * 5);  // ceil(18 / 4) steps an epoch
  ASSERT_EQ(c.val_loss.size(), 3u);
  for (int e = 0; e < 3; ++e) {
    EXPECT_TRUE(std::isfinite(c.val_loss[e]));
    EXPECT_NE(c.val_loss[e], c.test_loss[e]);
    EXPECT_TRUE(r.results[e].monitors_val);
  }
  // The schedule's best is a validation loss, never a test or training loss.
  EXPECT_NE(std::find(c.val_loss.begin(), c.val_loss.end(), c.plateau_best), c.val_loss.end());
  EXPECT_EQ(c.sample_labels, (std::vector<uint8_t>{0, 1, 2}));  // first test image of each class
  EXPECT_EQ(c.sample_reconstructions.size(), 3u * 16);

  // Without a hold-out the training loss steers, and val_loss is NaN.
  const TrainedRun n = train(arch, tiny_config(2, 0));
  const ae::Checkpoint& d = n.saved.back();
  EXPECT_EQ(d.train_count, 24);
  EXPECT_TRUE(std::isnan(d.val_loss[1]));
  EXPECT_FALSE(n.results[1].monitors_val);
  EXPECT_NE(std::find(d.train_loss.begin(), d.train_loss.end(), d.plateau_best), d.train_loss.end());
}

TEST_F(TrainerTest, ResumeContinuesBitIdentically) {
  const Architecture arch(2, 8, 8, {3, 2});
  const TrainedRun full = train(arch, tiny_config(3, 4));
  const TrainedRun first = train(arch, tiny_config(1, 4));
  const TrainedRun rest = train(arch, tiny_config(3, 4), &first.saved.back());
  ASSERT_EQ(rest.saved.size(), 2u);
  const ae::Checkpoint &a = full.saved.back(), &b = rest.saved.back();
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.optimizer.m, b.optimizer.m);
  EXPECT_EQ(a.train_loss, b.train_loss);
  EXPECT_EQ(a.val_loss, b.val_loss);
  EXPECT_EQ(a.lr_current, b.lr_current);
  EXPECT_EQ(a.plateau_bad_epochs, b.plateau_bad_epochs);
}

// A stop between steps (preemption) leaves a checkpoint inside the epoch; resuming from it
// ends exactly where the uninterrupted run does: weights, moments, losses and schedule.
TEST_F(TrainerTest, StopInsideAnEpochResumesBitIdentically) {
  const Architecture arch(2, 8, 8, {3, 2});
  ae::TrainerConfig cfg = tiny_config(3, 4);
  cfg.batch_size = 1;  // 20 steps an epoch: two backend calls, so a stop can land between them
  const TrainedRun full = train(arch, cfg);
  ASSERT_EQ(full.saved.size(), 3u);

  auto backend = ae::make_cpu_backend(arch, cfg.optimizer, 1);
  ae::Trainer t(cfg, *backend, random_split(24, 2, 8, 8, 1), random_split(6, 2, 8, 8, 2), "sha");
  t.start();
  int epochs_seen = 0, asked = 0;
  // Asked before each call: twice in epoch 1, then at the start of epoch 2 and after its
  // first call, where it stops.
  const bool finished = t.run([&](const ae::Checkpoint&, const ae::EpochResult&) { ++epochs_seen; }, nullptr, nullptr,
                              [&] { return ++asked == 4; });
  EXPECT_FALSE(finished);
  EXPECT_EQ(epochs_seen, 1);
  const ae::Checkpoint stopped = t.checkpoint();
  EXPECT_EQ(stopped.epochs_done, 1);
  EXPECT_EQ(stopped.epoch_images_done, backend->steps_per_call());
  EXPECT_GT(stopped.epoch_loss_sum, 0.0);
  EXPECT_EQ(stopped.optimizer.step, 20 + backend->steps_per_call());
  EXPECT_NE(stopped.params, full.saved[0].params);  // mid-epoch weights, not epoch 1's
  EXPECT_NE(stopped.params, full.saved[1].params);
  EXPECT_EQ(stopped.sample_reconstructions.size(), stopped.sample_images.size());
  EXPECT_NO_THROW(ae::validate_training_state(stopped, "m.h5"));

  const TrainedRun rest = train(arch, cfg, &stopped);
  ASSERT_EQ(rest.saved.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    const ae::Checkpoint &a = full.saved[e + 1], &b = rest.saved[e];
    EXPECT_EQ(a.params, b.params) << "epoch " << e + 2;
    EXPECT_EQ(a.optimizer.step, b.optimizer.step);
    EXPECT_EQ(a.optimizer.m, b.optimizer.m);
    EXPECT_EQ(a.optimizer.v, b.optimizer.v);
    EXPECT_EQ(a.train_loss, b.train_loss);
    EXPECT_EQ(a.val_loss, b.val_loss);
    EXPECT_EQ(a.test_loss, b.test_loss);
    EXPECT_EQ(a.lr_current, b.lr_current);
    EXPECT_EQ(b.epoch_images_done, 0);
  }
}

// Epochs of one call each (20 images, 5 steps): a stop asked during an epoch takes effect at
// the next epoch's start, with the finished epoch's state; during the last epoch, the run
// simply finishes.
TEST_F(TrainerTest, StopBetweenEpochsAndAtTheEndOfTheRun) {
  const Architecture arch(1, 4, 4, {2});
  for (int epochs : {2, 1}) {
    auto backend = ae::make_cpu_backend(arch, ae::OptimizerConfig{}, 1);
    ae::Trainer t(tiny_config(epochs, 4), *backend, random_split(24, 1, 4, 4, 1), random_split(6, 1, 4, 4, 2), "sha");
    t.start();
    int asked = 0;
    std::vector<ae::Checkpoint> saved;
    const bool finished = t.run([&](const ae::Checkpoint& c, const ae::EpochResult&) { saved.push_back(c); }, nullptr,
                                nullptr, [&] { return ++asked > 1; });
    ASSERT_EQ(saved.size(), 1u);
    EXPECT_EQ(finished, epochs == 1);
    EXPECT_EQ(asked, epochs);
    EXPECT_EQ(t.checkpoint().epochs_done, 1);
    EXPECT_EQ(t.checkpoint().epoch_images_done, 0);
    EXPECT_EQ(t.checkpoint().params, saved[0].params);
    EXPECT_EQ(t.checkpoint().optimizer.step, 5);
  }
}

TEST_F(TrainerTest, ResumeRefusesOtherDataOrOptions) {
  const Architecture arch(1, 4, 4, {2});
  const ae::Checkpoint c = train(arch, tiny_config(1, 4)).saved.back();
  auto refuses = [&](ae::TrainerConfig cfg, const Architecture& a, const char* what) {
    auto backend = ae::make_cpu_backend(a, cfg.optimizer, 1);
    ae::Trainer t(cfg, *backend, random_split(24, a.input_channels(), a.height(), a.width(), 1),
                  random_split(6, a.input_channels(), a.height(), a.width(), 2), "sha");
    try {
      t.resume(c);
      ADD_FAILURE() << "resume accepted " << what;
    } catch (const cae::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  ae::TrainerConfig cfg = tiny_config(3, 4);
  cfg.val_split = 5;
  refuses(cfg, arch, "--val-split 4, this run has --val-split 5");
  cfg = tiny_config(3, 4);
  cfg.seed = 6;
  refuses(cfg, arch, "--seed 5, this run has --seed 6");
  cfg = tiny_config(3, 4);
  cfg.batch_size = 8;
  refuses(cfg, arch, "--batch-size 4");
  refuses(tiny_config(3, 4), Architecture(1, 4, 4, {3}), "the architecture");
}

TEST_F(TrainerTest, RefusesAHoldOutOfEverythingAndImagesOfAnotherShape) {
  const Architecture arch(1, 4, 4, {2});
  auto backend = ae::make_cpu_backend(arch, ae::OptimizerConfig{}, 1);
  EXPECT_THROW(ae::Trainer(tiny_config(1, 24), *backend, random_split(24, 1, 4, 4, 1), random_split(2, 1, 4, 4, 2), ""),
               cae::UsageError);
  EXPECT_THROW(ae::Trainer(tiny_config(1, 0), *backend, random_split(24, 1, 8, 8, 1), random_split(2, 1, 8, 8, 2), ""),
               std::invalid_argument);
}

TEST_F(TrainerTest, DivergenceStopsBeforeTheBadEpochIsSaved) {
  const Architecture arch(1, 4, 4, {2});
  ae::TrainerConfig cfg = tiny_config(4, 4);
  cfg.optimizer.kind = "sgd";
  cfg.optimizer.lr = 1e12f;
  auto backend = ae::make_cpu_backend(arch, cfg.optimizer, 1);
  ae::Trainer t(cfg, *backend, random_split(24, 1, 4, 4, 1), random_split(6, 1, 4, 4, 2), "");
  t.start();
  int saved = 0;
  try {
    t.run([&](const ae::Checkpoint& c, const ae::EpochResult&) {
      ++saved;
      for (float p : c.params) ASSERT_TRUE(std::isfinite(p));
    });
    FAIL() << "no divergence";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("training diverged in epoch"), std::string::npos) << e.what();
  }
  EXPECT_LT(saved, 4);
}

// Class 2 (issue 19): the training state a checkpoint hands to --resume is validated like
// the options it stands for; a real checkpoint passes, each damaged field is named (10 cases).
TEST_F(TrainerTest, CheckpointTrainingStateIsValidatedLikeItsOptions) {
  const Architecture arch(1, 4, 4, {2});
  const ae::Checkpoint good = train(arch, tiny_config(2, 4)).saved.back();
  EXPECT_NO_THROW(ae::validate_training_state(good, "m.h5"));
  const double nan = std::nan("");
  const struct {
    const char* field;
    std::function<void(ae::Checkpoint&)> damage;
  } cases[] = {
      {"lr_current -0.001", [](ae::Checkpoint& c) { c.lr_current = -0.001; }},
      {"lr_current nan", [&](ae::Checkpoint& c) { c.lr_current = nan; }},
      {"/history/lr holds 0", [](ae::Checkpoint& c) { c.lr[0] = 0; }},
      {"optimizer 'adamw'", [](ae::Checkpoint& c) { c.optimizer_kind = "adamw"; }},
      {"optimizer_step -1", [](ae::Checkpoint& c) { c.optimizer.step = -1; }},
      {"optimizer_step 0", [](ae::Checkpoint& c) { c.optimizer.step = 0; }},
      {"optimizer_step 1000", [](ae::Checkpoint& c) { c.optimizer.step = 1000; }},
      {"/optimizer/v contains a negative", [](ae::Checkpoint& c) { c.optimizer.v[1] = -0.5f; }},
      {"batch_size 0", [](ae::Checkpoint& c) { c.batch_size = 0; }},
      {"plateau_best nan", [&](ae::Checkpoint& c) { c.plateau_best = nan; }},
      {"epoch_images_done 6 is not a step boundary", [](ae::Checkpoint& c) { c.epoch_images_done = 6; }},
      {"epoch_images_done 20 is not a step boundary", [](ae::Checkpoint& c) { c.epoch_images_done = 20; }},
      {"epoch_loss_sum -1", [](ae::Checkpoint& c) { c.epoch_images_done = 4, c.epoch_loss_sum = -1; }},
  };
  for (const auto& k : cases) {
    ae::Checkpoint c = good;
    k.damage(c);
    try {
      ae::validate_training_state(c, "m.h5");
      ADD_FAILURE() << "accepted " << k.field;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("m.h5: ") + k.field), std::string::npos) << e.what();
    }
  }
}

// The evaluation passes are announced (for their progress bar) before and after, once per
// split per epoch, without changing what is computed.
TEST_F(TrainerTest, EvaluationPassesReportProgress) {
  const Architecture arch(1, 4, 4, {2});
  const ae::TrainerConfig cfg = tiny_config(2, 4);
  auto backend = ae::make_cpu_backend(arch, cfg.optimizer, 1);
  ae::Trainer t(cfg, *backend, random_split(24, 1, 4, 4, 1), random_split(6, 1, 4, 4, 2), "sha");
  t.start();
  std::vector<std::string> calls;
  std::vector<double> test_loss;
  t.run([&](const ae::Checkpoint&, const ae::EpochResult& r) { test_loss.push_back(r.test_loss); }, nullptr,
        [&](int epoch, const char* split, int64_t done, int64_t total) {
          calls.push_back(std::to_string(epoch) + split + std::to_string(done) + "/" + std::to_string(total));
        });
  const std::vector<std::string> want = {"1validation0/4", "1validation4/4", "1test0/6", "1test6/6",
                                         "2validation0/4", "2validation4/4", "2test0/6", "2test6/6"};
  EXPECT_EQ(calls, want);
  EXPECT_EQ(test_loss, train(arch, cfg).saved.back().test_loss);
}

// The CPU backend with another number of steps per call, recording what each call got.
class CallRecorder final : public ae::AeBackend {
 public:
  CallRecorder(std::unique_ptr<ae::AeBackend> inner, int steps) : inner_(std::move(inner)), steps_(steps) {}
  struct Call {
    int64_t images;
    bool with_callback;
  };
  std::vector<Call> calls;

  int steps_per_call() const override { return steps_; }
  double train_epoch(const std::vector<int64_t>& order, int batch, float lr, const ae::StepCallback& cb) override {
    calls.push_back({int64_t(order.size()), bool(cb)});
    return inner_->train_epoch(order, batch, lr, cb);
  }
  std::string describe() const override { return inner_->describe(); }
  const Architecture& architecture() const override { return inner_->architecture(); }
  void set_params(const std::vector<float>& p) override { inner_->set_params(p); }
  std::vector<float> params() const override { return inner_->params(); }
  void set_optimizer_state(const ae::OptimizerState& s) override { inner_->set_optimizer_state(s); }
  ae::OptimizerState optimizer_state() const override { return inner_->optimizer_state(); }
  void set_train_images(const uint8_t* images, int64_t n) override { inner_->set_train_images(images, n); }
  double eval_loss(const uint8_t* images, int64_t n, int batch) override { return inner_->eval_loss(images, n, batch); }
  void reconstruct(const uint8_t* images, int64_t n, float* out) override { inner_->reconstruct(images, n, out); }
  void encode(const uint8_t* images, int64_t n, int batch, float* latent) override {
    inner_->encode(images, n, batch, latent);
  }

 private:
  std::unique_ptr<ae::AeBackend> inner_;
  int steps_;
};

// An epoch goes to the backend in calls of its steps_per_call() steps (the last call the
// rest), and a step callback only when the run has a progress listener: a GPU backend reads
// the loss back for one.
TEST_F(TrainerTest, CallsTakeTheBackendsStepsAndACallbackOnlyForAListener) {
  const Architecture arch(1, 4, 4, {2});
  const ae::TrainerConfig cfg = tiny_config(1, 0);  // 24 training images, batch 4: 6 steps
  for (const bool listening : {false, true}) {
    CallRecorder backend(ae::make_cpu_backend(arch, cfg.optimizer, 1), 4);
    ae::Trainer t(cfg, backend, random_split(24, 1, 4, 4, 1), random_split(6, 1, 4, 4, 2), "sha");
    t.start();
    int64_t heard = 0;
    const ae::Trainer::Progress progress = [&](int, int64_t done, int64_t, double) { heard = done; };
    ASSERT_TRUE(
        t.run([](const ae::Checkpoint&, const ae::EpochResult&) {}, listening ? progress : ae::Trainer::Progress()));
    ASSERT_EQ(backend.calls.size(), 2u) << "listening " << listening;
    EXPECT_EQ(backend.calls[0].images, 16);  // 4 steps of 4
    EXPECT_EQ(backend.calls[1].images, 8);   // the epoch's rest
    for (const auto& c : backend.calls) EXPECT_EQ(c.with_callback, listening);
    EXPECT_EQ(heard, listening ? 24 : 0);
  }
}

}  // namespace

// While a StopSignals lives, SIGUSR1 and SIGTERM only set its flag (naming the signal);
// afterwards they are ignored, the process being on its way to exit 75 (test_stop_signal.cpp).
TEST(StopSignals, TurnSigusr1AndSigtermIntoARequestAndRestoreTheHandlers) {
  struct sigaction ignore {}, before{}, after{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGUSR1, &ignore, &before);
  struct sigaction term_before {};
  sigaction(SIGTERM, nullptr, &term_before);
  for (int sig : {SIGUSR1, SIGTERM}) {
    cae::StopSignals stop;
    EXPECT_FALSE(stop.requested());
    EXPECT_EQ(stop.signal(), 0);
    raise(sig);
    EXPECT_TRUE(stop.requested());
    EXPECT_EQ(stop.signal(), sig);
  }
  sigaction(SIGUSR1, nullptr, &after);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
  sigaction(SIGUSR1, &before, nullptr);
  sigaction(SIGTERM, &term_before, nullptr);
  EXPECT_EQ(cae::kExitInterrupted, 75);  // EX_TEMPFAIL, the contract with the batch system
}
