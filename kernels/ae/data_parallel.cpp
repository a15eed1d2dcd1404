#include "kernels/ae/data_parallel.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/error.h"

namespace ae {

const char* process_env(const char* name) { return std::getenv(name); }

namespace {

// A non-negative integer from the environment; -1 when unset; throws when malformed.
int env_int(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1L << 20))
    throw cae::UsageError(std::string(name) + "='" + v + "' is not a rank number");
  return int(x);
}

}  // namespace

RankInfo resolve_rank(int rank_opt, int world_opt, int local_rank_opt, const EnvLookup& env) {
  RankInfo r;
  if (rank_opt >= 0 || world_opt >= 0) {
    if (rank_opt < 0 || world_opt < 0) throw cae::UsageError("--rank and --world-size go together");
    if (world_opt < 1) throw cae::UsageError("--world-size must be at least 1");
    if (rank_opt >= world_opt)
      throw cae::UsageError("--rank " + std::to_string(rank_opt) + " is outside --world-size " +
                            std::to_string(world_opt) + " (ranks are 0.." + std::to_string(world_opt - 1) + ")");
    r.rank = rank_opt;
    r.world = world_opt;
    r.local_rank = local_rank_opt >= 0 ? local_rank_opt : rank_opt;
    return r;
  }
  if (local_rank_opt >= 0) throw cae::UsageError("--local-rank needs --rank and --world-size");
  const int ntasks = env_int(env, "SLURM_STEP_NUM_TASKS");
  if (ntasks > 1) {
    const int procid = env_int(env, "SLURM_PROCID"), localid = env_int(env, "SLURM_LOCALID");
    if (procid < 0 || procid >= ntasks)
      throw cae::UsageError("SLURM_STEP_NUM_TASKS=" + std::to_string(ntasks) + " but SLURM_PROCID is " +
                            (procid < 0 ? std::string("unset") : std::to_string(procid)));
    r.rank = procid;
    r.world = ntasks;
    r.local_rank = localid >= 0 ? localid : 0;
    r.from_slurm = true;
  }
  return r;
}

ShardRange shard_of(int64_t global_size, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world || global_size < 0) throw std::invalid_argument("shard_of: bad rank");
  const int64_t q = global_size / world, rem = global_size % world;
  ShardRange s;
  s.first = rank * q + std::min<int64_t>(rank, rem);
  s.count = int(q + (rank < rem ? 1 : 0));
  return s;
}

ImageRange encode_share(int64_t n, int batch, int rank, int world) {
  if (batch <= 0 || world < 1 || rank < 0 || rank >= world || n < 0) throw std::invalid_argument("encode_share: bad rank");
  const int64_t batches = (n + batch - 1) / batch, q = batches / world, rem = batches % world;
  const int64_t b0 = rank * q + std::min<int64_t>(rank, rem), nb = q + (rank < rem ? 1 : 0);
  ImageRange r;
  r.first = std::min(n, b0 * batch);
  r.count = std::min(n, (b0 + nb) * batch) - r.first;
  return r;
}

EpochShard shard_epoch(const std::vector<int64_t>& order, int batch, int rank, int world) {
  if (batch <= 0) throw std::invalid_argument("shard_epoch: batch must be positive");
  const int64_t n = int64_t(order.size()), global = int64_t(batch) * world;
  EpochShard e;
  e.rows.reserve(size_t(n / world + batch));
  for (int64_t start = 0; start < n; start += global) {
    const int64_t g = std::min(global, n - start);
    const ShardRange s = shard_of(g, rank, world);
    e.rows.insert(e.rows.end(), order.begin() + start + s.first, order.begin() + start + s.first + s.count);
    e.local_sizes.push_back(s.count);
    e.global_sizes.push_back(int(g));
  }
  return e;
}

}  // namespace ae
