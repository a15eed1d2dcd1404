#include "kernels/ae/data_parallel.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cli.h"
#include "common/error.h"
#include "common/group.h"

namespace ae {

DataParallelGroup data_parallel_group(const cae::GroupOptions& o, const std::string& output) {
  const cae::GroupPlace p = cae::resolve_group_place(o.rank, o.world_size, o.local_rank);
  DataParallelGroup g{p.rank, p.world, p.local_rank, o.rendezvous, o.timeout_seconds, ""};
  if (p.world > 1 || !o.rendezvous.empty()) g.rendezvous = cae::group_rendezvous_path(o.rendezvous, output, p);
  // Before anything is written: the files the command line names are compared by size and time.
  if (p.world > 1) g.agreement = cae::launch_agreement(cae::tool_command_line());
  return g;
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
