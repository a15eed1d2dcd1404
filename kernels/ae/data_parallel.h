// Data-parallel training over several GPUs (docs/MULTI_GPU.md): one process per GPU, each
// a rank of one NCCL group. This file is the part that needs no GPU: who this process is
// (from --rank/--world-size or Slurm's variables) and which images it trains at each step.
//
// The semantics: N ranks at per-GPU batch b train exactly the single-GPU run at batch N·b.
// Every rank computes the same seeded epoch order; each global batch of N·b rows is cut
// into N consecutive shards, rank r training shard r; the loss gradient of a shard is
// scaled by the global batch (2 / (N·b · image_dim)) and the shards' gradients are summed
// by an all-reduce, so the optimizer sees the gradient of the global batch's mean loss.
// The epoch's last, shorter global batch is cut as evenly as possible (a rank may get
// none: it still joins the all-reduce with a zero gradient).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/group.h"
#include "kernels/ae/backend.h"

namespace ae {

// The group of a training process from its group options (--rank, --world-size, ... or
// Slurm's/torchrun's variables): the launch folder through which rank 0 hands the NCCL id
// to the others (cae::share_nccl_id) lies beside `output` (a folder every rank sees), named after the Slurm job
// step or the torchrun run, unless given; and what its ranks must agree on.
DataParallelGroup data_parallel_group(const cae::GroupOptions& options, const std::string& output);

// The rows of one global batch of `global_size` rows that rank `rank` of `world` trains:
// [first, first + count). Shards are consecutive and differ in size by at most one.
struct ShardRange {
  int64_t first = 0;
  int count = 0;
};
ShardRange shard_of(int64_t global_size, int rank, int world);

// One epoch of rank `rank`: the rows it trains, step after step, and each step's local and
// global batch sizes. With world == 1 it is the plain epoch (rows == order).
struct EpochShard {
  std::vector<int64_t> rows;         // this rank's rows of every step, concatenated
  std::vector<int> local_sizes;      // per step; may be 0 in the last step
  std::vector<int> global_sizes;     // per step: batch·world, the last one shorter
};
EpochShard shard_epoch(const std::vector<int64_t>& order, int batch, int rank, int world);

// The images [first, first + count) of n that rank `rank` of `world` encodes (ae-encode on a
// group): whole batches of `batch`, contiguous, the larger shares first, so every batch a
// rank encodes is one the single-process run encodes, and rank order is image order.
struct ImageRange {
  int64_t first = 0, count = 0;
};
ImageRange encode_share(int64_t n, int batch, int rank, int world);

}  // namespace ae
