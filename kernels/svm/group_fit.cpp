#include "kernels/svm/group_fit.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/log.h"

namespace svm {

std::vector<std::vector<int>> balance_pairs(const std::vector<int64_t>& class_sizes, int world) {
  if (world < 1) throw std::invalid_argument("balance_pairs: world must be at least 1");
  const int k = static_cast<int>(class_sizes.size());
  std::vector<std::pair<double, int>> cost;  // (cost, pair)
  for (int a = 0, q = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++q) {
      const double np = static_cast<double>(class_sizes[a] + class_sizes[b]);
      cost.push_back({np * np, q});
    }
  std::stable_sort(cost.begin(), cost.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<double> load(static_cast<size_t>(world), 0.0);
  std::vector<std::vector<int>> out(static_cast<size_t>(world));
  for (const auto& [c, q] : cost) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += c;
    out[r].push_back(q);
  }
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

Share share_of(int64_t total, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world || total < 0) throw std::invalid_argument("share_of: bad rank");
  const int64_t q = total / world, rem = total % world;
  return {rank * q + std::min<int64_t>(rank, rem), q + (rank < rem ? 1 : 0)};
}

std::vector<double> decision_values_on_group(const Classifier& clf, float* X, int64_t n, int views,
                                             cae::Device device, cae::GroupExchange& group) {
  const int pairs = clf.model().n_pairs();
  const int D = clf.n_features();
  if (group.world() == 1) return average_views(clf.decision_values_scaled(X, n * views, device), n, pairs, views);
  // Whole blocks of the CPU's row blocks (decision_block_rows), so each rank's sgemm calls
  // are the single process's.
  const int64_t block = decision_block_rows(clf.model());
  auto rows_of = [&](int r) {
    const Share b = share_of((n + block - 1) / block, r, group.world());
    const int64_t first = std::min(n, b.first * block);
    return Share{first, std::min(n, (b.first + b.count) * block) - first};
  };
  const Share mine = rows_of(group.rank());
  std::vector<float> rows(static_cast<size_t>(mine.count * views) * static_cast<size_t>(D));
  for (int v = 0; v < views && mine.count > 0; ++v)  // a rank may get no block (no rows: no copy)
    std::memcpy(rows.data() + static_cast<size_t>(v * mine.count) * D, X + static_cast<size_t>(v * n + mine.first) * D,
                sizeof(float) * static_cast<size_t>(mine.count) * D);
  std::vector<double> dec;
  if (mine.count > 0)
    dec = average_views(clf.decision_values_scaled(rows.data(), mine.count * views, device), mine.count, pairs, views);
  cae::ByteWriter w;
  w.put_vector(dec);
  const auto all = group.gather("decision-values", w.bytes());
  if (!group.lead()) return {};
  std::vector<double> out;
  out.reserve(static_cast<size_t>(n) * pairs);
  for (int r = 0; r < group.world(); ++r) {
    const Share s = rows_of(r);
    std::vector<double> part;
    if (r == 0) {
      part = std::move(dec);
    } else {
      cae::ByteReader in(all[static_cast<size_t>(r)], "rank " + std::to_string(r) + "'s decision values");
      part = in.get_vector<double>();
      if (!in.done() || part.size() != static_cast<size_t>(s.count) * pairs)
        in.fail(std::to_string(part.size()) + " values for " + std::to_string(s.count) + " rows");
    }
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

namespace {
constexpr uint32_t kSolutionsMagic = 0x53564d50;  // "SVMP"
}

std::vector<unsigned char> solutions_to_bytes(const std::vector<PairSolution>& s) {
  cae::ByteWriter w;
  w.put<uint32_t>(kSolutionsMagic);
  w.put<uint64_t>(s.size());
  for (const PairSolution& p : s) {
    w.put<int32_t>(p.pair);
    w.put<double>(p.rho);
    w.put<int64_t>(p.iterations);
    w.put<uint8_t>(p.hit_iteration_limit ? 1 : 0);
    w.put_vector(p.alpha);
  }
  return w.bytes();
}

std::vector<PairSolution> solutions_from_bytes(const std::vector<unsigned char>& b, const std::string& name) {
  cae::ByteReader r(b, name);
  if (r.get<uint32_t>() != kSolutionsMagic) r.fail("not a pair-solutions file");
  const uint64_t count = r.get<uint64_t>();
  if (count > b.size()) r.fail("claims " + std::to_string(count) + " solutions");
  std::vector<PairSolution> out;
  for (uint64_t i = 0; i < count; ++i) {
    PairSolution p;
    p.pair = r.get<int32_t>();
    p.rho = r.get<double>();
    p.iterations = r.get<int64_t>();
    p.hit_iteration_limit = r.get<uint8_t>() != 0;
    p.alpha = r.get_vector<double>();
    out.push_back(std::move(p));
  }
  if (!r.done()) r.fail("trailing bytes");
  return out;
}

Model fit_on_group(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, cae::Device device,
                   cae::GroupExchange& group, const PairCallback& cb) {
  if (group.world() == 1)
    return device == cae::Device::gpu ? fit_gpu(X, y, n, dim, p, cb) : fit_cpu(X, y, n, dim, p, cb);
  std::vector<std::vector<int64_t>> members;
  Model shell = begin_fit(y, n, dim, p, members);
  std::vector<int64_t> sizes;
  for (const auto& m : members) sizes.push_back(static_cast<int64_t>(m.size()));
  const std::vector<int> mine = balance_pairs(sizes, group.world())[static_cast<size_t>(group.rank())];
  std::vector<PairSolution> solved;
  if (!mine.empty())
    solved = device == cae::Device::gpu ? std::move(solve_pairs_gpu(X, y, n, dim, p, {p.C}, mine, cb).front())
                                        : solve_pairs_cpu(X, y, n, dim, p, mine, cb);
  const std::vector<std::vector<unsigned char>> all = group.gather("pairs", solutions_to_bytes(solved));
  if (!group.lead()) return shell;
  std::vector<PairSolution> every;
  for (int r = 0; r < group.world(); ++r) {
    std::vector<PairSolution> part =
        r == 0 ? std::move(solved) : solutions_from_bytes(all[static_cast<size_t>(r)], "rank " + std::to_string(r) + "'s pair solutions");
    for (PairSolution& s : part) every.push_back(std::move(s));
  }
  for (const PairSolution& s : every)
    if (s.hit_iteration_limit)
      cae::log_warn("svm: pair %d reached the iteration limit before tol %g", s.pair, p.tol);
  return assemble_model(X, y, n, dim, p, std::move(every));
}

}  // namespace svm
