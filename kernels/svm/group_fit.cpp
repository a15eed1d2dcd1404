#include "kernels/svm/group_fit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common/log.h"

namespace svm {

namespace {

// The deal's cost model in units of one diagonal block's cost per n_c² · dim (its ssyrk),
// calibrated on svm-fit's per-pair times (docs/DECISIONS.md, "A class-aware deal of the
// class pairs").
constexpr double kOffDiagonal = 1.4;  // per n_a · n_b · dim: K_ab's sgemm, exp and transpose
constexpr double kCopy = 100;         // per n_a² + n_b²: the cached K_aa, K_bb copied into the pair matrix
constexpr double kSolve = 400;        // per (n_a + n_b)² at the pairs' mean difficulty: SMO
// Moves the local search may weigh in all: a bound on its time for many classes.
constexpr int64_t kSearchEvaluations = 4'000'000;

struct DealModel {
  int k = 0, pairs = 0;
  std::vector<double> diag, pair;  // a class's K_cc; a pair's own work
  std::vector<int> a, b;
};

DealModel deal_model(const std::vector<int64_t>& sizes, int dim, const std::vector<double>& difficulty) {
  if (dim < 1) throw std::invalid_argument("balance_pairs: dim must be at least 1");
  const size_t pairs = sizes.size() * (sizes.size() > 0 ? sizes.size() - 1 : 0) / 2;
  if (!difficulty.empty() && difficulty.size() != pairs)
    throw std::invalid_argument("balance_pairs: " + std::to_string(difficulty.size()) + " difficulties for " +
                                std::to_string(pairs) + " pairs");
  double mean = 0;
  for (double h : difficulty) {
    if (!(h > 0) || !std::isfinite(h)) throw std::invalid_argument("balance_pairs: a difficulty must be finite and > 0");
    mean += h / static_cast<double>(pairs);
  }
  DealModel m;
  m.k = static_cast<int>(sizes.size());
  for (int64_t n : sizes) {
    if (n < 0) throw std::invalid_argument("balance_pairs: a class of " + std::to_string(n) + " rows");
    m.diag.push_back(static_cast<double>(n) * static_cast<double>(n) * dim);
  }
  for (int a = 0; a < m.k; ++a)
    for (int b = a + 1; b < m.k; ++b) {
      const double na = static_cast<double>(sizes[a]), nb = static_cast<double>(sizes[b]);
      const double hard = difficulty.empty() ? 1.0 : difficulty[m.pair.size()] / mean;
      m.pair.push_back(kOffDiagonal * na * nb * dim + kCopy * (na * na + nb * nb) +
                       kSolve * hard * (na + nb) * (na + nb));
      m.a.push_back(a);
      m.b.push_back(b);
    }
  m.pairs = static_cast<int>(m.pair.size());
  return m;
}

// A deal being built: each rank's load and how many of its pairs touch each class.
class Deal {
 public:
  Deal(const DealModel& m, int world)
      : m_(m), world_(world), touch_(static_cast<size_t>(world) * m.k, 0), load_(world, 0.0), owner_(m.pairs, -1) {}
  int world() const { return world_; }
  double load(int r) const { return load_[r]; }
  int owner(int q) const { return owner_[q]; }
  int touches(int r, int c) const { return touch_[static_cast<size_t>(r) * m_.k + c]; }
  // What pair q would add to rank r.
  double extra(int q, int r) const {
    return m_.pair[q] + (touches(r, m_.a[q]) ? 0 : m_.diag[m_.a[q]]) + (touches(r, m_.b[q]) ? 0 : m_.diag[m_.b[q]]);
  }
  void add(int q, int r) {
    for (int c : {m_.a[q], m_.b[q]})
      if (touch_[static_cast<size_t>(r) * m_.k + c]++ == 0) load_[r] += m_.diag[c];
    load_[r] += m_.pair[q];
    owner_[q] = r;
  }
  void remove(int q) {
    const int r = owner_[q];
    for (int c : {m_.a[q], m_.b[q]})
      if (--touch_[static_cast<size_t>(r) * m_.k + c] == 0) load_[r] -= m_.diag[c];
    load_[r] -= m_.pair[q];
    owner_[q] = -1;
  }
  double max_load() const { return *std::max_element(load_.begin(), load_.end()); }
  std::vector<std::vector<int>> lists() const {
    std::vector<std::vector<int>> out(static_cast<size_t>(world_));
    for (int q = 0; q < m_.pairs; ++q) out[static_cast<size_t>(owner_[q])].push_back(q);
    return out;
  }

 private:
  const DealModel& m_;
  int world_;
  std::vector<int> touch_;
  std::vector<double> load_;
  std::vector<int> owner_;
};

// Largest pair first (its work and both diagonal blocks), each to the rank it leaves least
// loaded; `class_aware` counts only the diagonal blocks the rank lacks, else all of them
// (plain longest processing time first).
Deal greedy_deal(const DealModel& m, int world, bool class_aware) {
  std::vector<int> order(static_cast<size_t>(m.pairs));
  std::iota(order.begin(), order.end(), 0);
  auto alone = [&](int q) { return m.pair[q] + m.diag[m.a[q]] + m.diag[m.b[q]]; };
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return alone(x) > alone(y); });
  Deal d(m, world);
  for (int q : order) {
    int best = 0;
    double best_load = 0;
    for (int r = 0; r < world; ++r) {
      const double l = d.load(r) + (class_aware ? d.extra(q, r) : alone(q));
      if (r == 0 || l < best_load) best = r, best_load = l;
    }
    d.add(q, best);
  }
  return d;
}

// Moves every pair of rank r touching class c to rank s, so that r no longer needs K_cc;
// with `give_back`, then pairs of s not touching c back to r while that lowers the larger of
// the two loads. Returns the moves made, (pair, from), for undo.
std::vector<std::pair<int, int>> evict_class(Deal& d, const DealModel& m, int c, int r, int s, bool give_back,
                                             int64_t& evaluations) {
  std::vector<std::pair<int, int>> moved;
  for (int q = 0; q < m.pairs; ++q)
    if (d.owner(q) == r && (m.a[q] == c || m.b[q] == c)) d.remove(q), d.add(q, s), moved.push_back({q, r});
  while (give_back) {
    double best = std::max(d.load(r), d.load(s)) * (1 - 1e-12);
    int pick = -1;
    for (int q = 0; q < m.pairs; ++q) {
      if (d.owner(q) != s || m.a[q] == c || m.b[q] == c) continue;
      --evaluations;
      d.remove(q), d.add(q, r);
      const double after = std::max(d.load(r), d.load(s));
      if (after < best) best = after, pick = q;
      d.remove(q), d.add(q, s);
    }
    if (pick < 0) break;
    d.remove(pick), d.add(pick, r), moved.push_back({pick, s});
  }
  return moved;
}

void undo(Deal& d, const std::vector<std::pair<int, int>>& moved) {
  for (auto it = moved.rbegin(); it != moved.rend(); ++it) d.remove(it->first), d.add(it->first, it->second);
}

// Lowers the most loaded rank's load while that is possible: one of its pairs moved to
// another rank, all its pairs of one class moved (which drops that class's block from it;
// with `give_back` the other rank returns pairs of other classes), or else one of its pairs
// swapped with another rank's. A change is taken only when both ranks it touches end below the old
// maximum, so the sorted loads fall and the search ends.
void improve(Deal& d, const DealModel& m, bool give_back, int64_t& evaluations) {
  const int world = d.world();
  if (world < 2) return;
  enum Kind { none, move, evict, swap };
  while (evaluations > 0) {
    int r = 0;
    for (int s = 1; s < world; ++s)
      if (d.load(s) > d.load(r)) r = s;
    Kind kind = none;
    int best_x = -1, best_y = -1, best_s = -1;
    double best = d.load(r) * (1 - 1e-12);
    auto consider = [&](Kind k, int x, int y, int s) {
      --evaluations;
      const double after = std::max(d.load(r), d.load(s));
      if (after < best) best = after, kind = k, best_x = x, best_y = y, best_s = s;
    };
    std::vector<int> mine;
    for (int q = 0; q < m.pairs; ++q)
      if (d.owner(q) == r) mine.push_back(q);
    for (int q : mine)
      for (int s = 0; s < world; ++s) {
        if (s == r) continue;
        d.remove(q), d.add(q, s);
        consider(move, q, -1, s);
        d.remove(q), d.add(q, r);
      }
    for (int c = 0; c < m.k && evaluations > 0; ++c) {
      if (!d.touches(r, c)) continue;
      for (int s = 0; s < world; ++s) {
        if (s == r) continue;
        const auto moved = evict_class(d, m, c, r, s, give_back, evaluations);
        consider(evict, c, -1, s);
        undo(d, moved);
      }
    }
    if (kind == none)
      for (int q : mine)
        for (int p = 0; p < m.pairs && evaluations > 0; ++p) {
          const int s = d.owner(p);
          if (s == r) continue;
          d.remove(q), d.remove(p), d.add(q, s), d.add(p, r);
          consider(swap, q, p, s);
          d.remove(q), d.remove(p), d.add(q, r), d.add(p, s);
        }
    if (kind == none) return;
    if (kind == move) {
      d.remove(best_x), d.add(best_x, best_s);
    } else if (kind == evict) {
      evict_class(d, m, best_x, r, best_s, give_back, evaluations);
    } else {
      d.remove(best_x), d.remove(best_y), d.add(best_x, best_s), d.add(best_y, r);
    }
  }
}

}  // namespace

std::vector<std::vector<int>> balance_pairs(const std::vector<int64_t>& class_sizes, int dim, int world,
                                            const std::vector<double>& difficulty) {
  if (world < 1) throw std::invalid_argument("balance_pairs: world must be at least 1");
  const DealModel m = deal_model(class_sizes, dim, difficulty);
  // Local searches end in different local optima: four of them (both starts, evictions with
  // and without pairs given back), the lowest maximum kept, the first on a tie. One of them
  // starts from longest processing time first, so the deal is never worse under the model.
  std::vector<std::vector<int>> best;
  double best_max = 0;
  for (bool class_aware : {true, false})
    for (bool give_back : {true, false}) {
      int64_t evaluations = kSearchEvaluations;
      Deal d = greedy_deal(m, world, class_aware);
      improve(d, m, give_back, evaluations);
      if (best.empty() || d.max_load() < best_max) best = d.lists(), best_max = d.max_load();
    }
  return best;
}

std::vector<double> deal_costs(const std::vector<int64_t>& class_sizes, int dim,
                               const std::vector<std::vector<int>>& deal, const std::vector<double>& difficulty) {
  const DealModel m = deal_model(class_sizes, dim, difficulty);
  std::vector<double> out;
  for (const auto& pairs : deal) {
    std::vector<uint8_t> touched(static_cast<size_t>(m.k), 0);
    double cost = 0;
    for (int q : pairs) {
      if (q < 0 || q >= m.pairs) throw std::invalid_argument("deal_costs: pair " + std::to_string(q) + " of " + std::to_string(m.pairs));
      cost += m.pair[q];
      for (int c : {m.a[q], m.b[q]})
        if (!touched[c]) touched[c] = 1, cost += m.diag[c];
    }
    out.push_back(cost);
  }
  return out;
}

std::vector<double> pair_difficulty(const float* X, int dim, const std::vector<std::vector<int64_t>>& members) {
  const int k = static_cast<int>(members.size());
  std::vector<std::vector<double>> mean(static_cast<size_t>(k), std::vector<double>(static_cast<size_t>(dim), 0.0));
  std::vector<double> spread(static_cast<size_t>(k), 0.0);
  for (int c = 0; c < k; ++c) {
    const auto& rows = members[static_cast<size_t>(c)];
    const int64_t count = static_cast<int64_t>(rows.size());
    const int64_t step = std::max<int64_t>(1, (count + kDifficultyRows - 1) / kDifficultyRows);
    int64_t used = 0;
    for (int64_t i = 0; i < count; i += step, ++used) {
      const float* x = X + rows[static_cast<size_t>(i)] * dim;
      for (int f = 0; f < dim; ++f) mean[c][f] += x[f];
    }
    for (double& v : mean[c]) v /= static_cast<double>(std::max<int64_t>(used, 1));
    for (int64_t i = 0; i < count; i += step) {
      const float* x = X + rows[static_cast<size_t>(i)] * dim;
      for (int f = 0; f < dim; ++f) spread[c] += (x[f] - mean[c][f]) * (x[f] - mean[c][f]);
    }
    spread[c] /= static_cast<double>(std::max<int64_t>(used, 1));
  }
  std::vector<double> out;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b) {
      double d2 = 0;
      for (int f = 0; f < dim; ++f) d2 += (mean[a][f] - mean[b][f]) * (mean[a][f] - mean[b][f]);
      // Within [1e-3, 1e3]: classes on top of each other, or of no spread (one row each), stay
      // finite and above zero.
      const double separation = std::clamp(d2 / std::max(spread[a] + spread[b], 1e-300), 1e-3, 1e3);
      out.push_back(1.0 / (separation * std::sqrt(separation)));
    }
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
  const int64_t block = clf.decision_block_rows();
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

namespace {

// One line: each rank's pairs and classes, and the slowest rank's modeled share of the work.
void log_deal(const std::vector<int64_t>& sizes, int dim, const std::vector<std::vector<int>>& deal,
              const std::vector<double>& difficulty) {
  const int k = static_cast<int>(sizes.size());
  std::vector<int> all(static_cast<size_t>(k) * (k - 1) / 2);
  std::iota(all.begin(), all.end(), 0);
  const double one = deal_costs(sizes, dim, {all}, difficulty)[0];
  const std::vector<double> cost = deal_costs(sizes, dim, deal, difficulty);
  std::vector<int> first_of(all.size()), second_of(all.size());
  for (int a = 0, q = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++q) first_of[q] = a, second_of[q] = b;
  std::string pairs, classes;
  for (const auto& v : deal) {
    std::vector<uint8_t> touched(static_cast<size_t>(k), 0);
    for (int q : v) touched[first_of[q]] = touched[second_of[q]] = 1;
    pairs += (pairs.empty() ? "" : "+") + std::to_string(v.size());
    classes += (classes.empty() ? "" : "+") + std::to_string(std::count(touched.begin(), touched.end(), 1));
  }
  cae::log_info("svm: the pairs dealt to %zu ranks: %s pairs, touching %s classes; the slowest rank %.1f %% of one "
                "process's work by the deal's cost model",
                deal.size(), pairs.c_str(), classes.c_str(),
                one > 0 ? 100 * *std::max_element(cost.begin(), cost.end()) / one : 0.0);
}

}  // namespace

Model fit_on_group(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, cae::Device device,
                   cae::GroupExchange& group, const PairCallback& cb) {
  if (group.world() == 1)
    return device == cae::Device::gpu ? fit_gpu(X, y, n, dim, p, cb) : fit_cpu(X, y, n, dim, p, cb);
  std::vector<std::vector<int64_t>> members;
  Model shell = begin_fit(y, n, dim, p, members);
  std::vector<int64_t> sizes;
  for (const auto& m : members) sizes.push_back(static_cast<int64_t>(m.size()));
  const std::vector<double> difficulty = pair_difficulty(X, dim, members);
  const std::vector<std::vector<int>> deal = balance_pairs(sizes, dim, group.world(), difficulty);
  const std::vector<int>& mine = deal[static_cast<size_t>(group.rank())];
  if (group.lead() && p.log_summary) log_deal(sizes, dim, deal, difficulty);
  if (cb && !mine.empty()) cb(0, static_cast<int>(mine.size()));  // this rank's count, before its first pair
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
