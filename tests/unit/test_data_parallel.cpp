// Data parallelism without GPUs (kernels/ae/data_parallel.h, common/group.h,
// common/rank_launcher.h): which rank trains which rows, where the rank comes from, the id
// exchange, and the sharded gradient equal to the global batch's.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "common/error.h"
#include "common/group.h"
#include "common/rank_launcher.h"
#include "tests/support/cpu_gradient.h"
#include "kernels/ae/data_parallel.h"
#include "kernels/ae/model.h"
#include "kernels/ae/trainer.h"

namespace {

cae::EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto held = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [held](const char* name) -> const char* {
    auto it = held->find(name);
    return it == held->end() ? nullptr : it->second.c_str();
  };
}

TEST(DataParallel, ShardsCoverEveryGlobalBatchInOrder) {
  const std::vector<int64_t> order = ae::epoch_order(7, 1, 1003);
  for (int world : {1, 2, 3, 8}) {
    for (int batch : {1, 16, 64}) {
      std::vector<ae::EpochShard> shards;
      for (int r = 0; r < world; ++r) shards.push_back(ae::shard_epoch(order, batch, r, world));
      const size_t steps = shards[0].global_sizes.size();
      EXPECT_EQ(steps, size_t((order.size() + size_t(batch * world) - 1) / size_t(batch * world)));
      // Step by step, the ranks' shards laid side by side are the global batch.
      std::vector<size_t> at(size_t(world), 0);
      std::vector<int64_t> rebuilt;
      for (size_t s = 0; s < steps; ++s) {
        int sum = 0, lo = 1 << 30, hi = 0;
        for (int r = 0; r < world; ++r) {
          const int c = shards[size_t(r)].local_sizes[s];
          EXPECT_EQ(shards[size_t(r)].global_sizes[s], shards[0].global_sizes[s]);
          rebuilt.insert(rebuilt.end(), shards[size_t(r)].rows.begin() + long(at[size_t(r)]),
                         shards[size_t(r)].rows.begin() + long(at[size_t(r)]) + c);
          at[size_t(r)] += size_t(c);
          sum += c, lo = std::min(lo, c), hi = std::max(hi, c);
        }
        EXPECT_EQ(sum, shards[0].global_sizes[s]);
        EXPECT_LE(hi - lo, 1);  // as even as possible
        if (s + 1 < steps) {
          EXPECT_EQ(lo, batch);
        }
      }
      EXPECT_EQ(rebuilt, order) << "world " << world << " batch " << batch;
    }
  }
}

TEST(DataParallel, ALastBatchShorterThanTheGroupLeavesSomeRanksEmpty) {
  std::vector<int64_t> order(2 * 4 + 3);  // two full global batches of 4x1, then 3 rows
  std::iota(order.begin(), order.end(), 0);
  const ae::EpochShard last = ae::shard_epoch(order, 1, 3, 4);
  ASSERT_EQ(last.local_sizes.size(), 3u);
  EXPECT_EQ(last.local_sizes.back(), 0);
  EXPECT_EQ(last.global_sizes.back(), 3);
  EXPECT_EQ(last.rows, (std::vector<int64_t>{3, 7}));
}

// The gradient the group applies (each shard's mean-loss gradient weighted by its share of
// the global batch, summed as the all-reduce sums) equals the global batch's gradient.
TEST(DataParallel, ShardGradientsSumToTheGlobalBatchGradient) {
  const ae::Architecture arch(1, 8, 8, {4, 3});
  const std::vector<float> params = ae::init_params(arch, 3);
  const int global = 10, world = 3;
  std::mt19937 rng(5);
  std::vector<uint8_t> images(size_t(global) * size_t(arch.image_dim()));
  for (auto& p : images) p = uint8_t(rng() & 255);
  const size_t P = size_t(arch.param_count());
  std::vector<float> out(images.size()), whole(P), part(P);
  std::vector<double> summed(P, 0.0);
  ae::cpu_loss_and_gradient(arch, params, images.data(), global, 1, out.data(), whole.data());
  for (int r = 0; r < world; ++r) {
    const ae::ShardRange s = ae::shard_of(global, r, world);
    ASSERT_GT(s.count, 0);
    ae::cpu_loss_and_gradient(arch, params, images.data() + s.first * arch.image_dim(), s.count, 1, out.data(),
                              part.data());
    for (size_t i = 0; i < P; ++i) summed[i] += double(part[i]) * s.count / global;
  }
  double worst = 0, scale = 0;
  for (size_t i = 0; i < P; ++i) {
    worst = std::max(worst, std::fabs(summed[i] - whole[i]));
    scale = std::max(scale, double(std::fabs(whole[i])));
  }
  ASSERT_GT(scale, 0.0);
  EXPECT_LT(worst, 1e-5 * scale);
}

TEST(DataParallel, RankFromOptionsOrSlurm) {
  const auto none = env_of({});
  cae::GroupPlace r = cae::resolve_group_place(-1, -1, -1, none);
  EXPECT_EQ(r.world, 1);
  EXPECT_EQ(r.rank, 0);
  r = cae::resolve_group_place(2, 4, -1, none);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.world, 4);
  EXPECT_EQ(r.local_rank, 2);
  r = cae::resolve_group_place(-1, -1, -1, env_of({{"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.source, "slurm");
  // One Slurm task is no group; explicit options win over Slurm's.
  EXPECT_EQ(cae::resolve_group_place(-1, -1, -1, env_of({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_PROCID", "0"}})).world, 1);
  EXPECT_EQ(cae::resolve_group_place(1, 2, 0, env_of({{"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_PROCID", "5"}})).world, 2);
}

TEST(DataParallel, InconsistentRanksAreUsageErrors) {
  const auto none = env_of({});
  EXPECT_THROW(cae::resolve_group_place(4, 4, -1, none), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(0, -1, -1, none), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(-1, -1, 0, none), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(-1, -1, -1, env_of({{"SLURM_STEP_NUM_TASKS", "4"}})), cae::UsageError);
  EXPECT_THROW(cae::resolve_group_place(-1, -1, -1, env_of({{"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_PROCID", "x"}})), cae::UsageError);
}

// The NCCL id's exchange: tests/unit/test_nccl_id_exchange.cpp.

TEST(RankLauncher, OptionIsRemovedInBothSpellings) {
  const char* argv[] = {"ae-train", "--gpus", "2", "--data", "d.h5", "--gpus=3", "-o", "m.h5"};
  EXPECT_EQ(cae::args_without_option(8, const_cast<char**>(argv), "--gpus"),
            (std::vector<std::string>{"--data", "d.h5", "-o", "m.h5"}));
}

}  // namespace

// The group of a training process: its place from the options and its rendezvous file
// (given, or named after the launch: a group from bare options has none to name it by);
// one process has none.
TEST(DataParallel, GroupOfATrainingProcess) {
  cae::GroupOptions o;
  o.rank = 1, o.world_size = 3, o.local_rank = 0, o.timeout_seconds = 7;
  EXPECT_THROW(ae::data_parallel_group(o, "/runs/a/model.h5"), cae::UsageError);
  o.rendezvous = "/shared/id-file";
  const ae::DataParallelGroup g = ae::data_parallel_group(o, "/runs/a/model.h5");
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.world, 3);
  EXPECT_EQ(g.local_rank, 0);
  EXPECT_EQ(g.timeout_seconds, 7);
  EXPECT_EQ(g.rendezvous, "/shared/id-file");
  cae::GroupOptions one;
  one.rank = 0, one.world_size = 1;
  const ae::DataParallelGroup single = ae::data_parallel_group(one, "/runs/a/model.h5");
  EXPECT_EQ(single.world, 1);
  EXPECT_EQ(single.rank, 0);
  EXPECT_TRUE(single.rendezvous.empty());
}
