// One-vs-one multiclass training on the CPU: for each pair of classes (a, b), a < b, the
// binary problem "a (+1) against b (−1)" over the samples of both classes in their original
// order, exactly as libsvm builds it; then libsvm's model layout.
//
// Kernel storage per pair, within --cache-mb:
//   dense       — the whole pair matrix [[K_aa, K_ab], [K_ba, K_bb]] in memory: K_ab is one
//                 sgemm, the diagonal blocks K_cc come from a per-class cache (one ssyrk per
//                 class for the whole fit, while the budget holds them) or are computed in place.
//   working set — when the pair matrix does not fit: the working-set solver (working_set.h)
//                 over an LRU cache of kernel rows, the budget less the working set's own rows;
//                 each round's missing rows one sgemm. svm-fit's default budget is half the
//                 memory left (default_cache_mb), so on a machine with the room the pairs stay
//                 dense, which computes each kernel value once.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <map>
#include <stdexcept>

#include "common/log.h"
#include "common/timer.h"
#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/cpu/working_set.h"
#include "kernels/svm/svm.h"

namespace svm {

const char* kernel_name(KernelType k) { return k == KernelType::linear ? "linear" : "rbf"; }

const char* kind_name(SvmKind k) { return k == SvmKind::one_class ? "one-class" : "c-svc"; }

SvmKind parse_kind(const std::string& name) {
  if (name == "c-svc") return SvmKind::c_svc;
  if (name == "one-class") return SvmKind::one_class;
  throw std::invalid_argument("svm: unknown kind '" + name + "' (c-svc or one-class)");
}

double class_weight(const ClassWeights& weights, int32_t label) {
  const auto it = weights.find(label);
  return it == weights.end() ? 1.0 : it->second;
}

namespace cpu {
namespace {

// The working-set solver within `budget` bytes of kernel values: its q rows of n, the rest
// the cache (at least the q rows, whatever the budget). Shrinking where that cache holds
// under a twentieth of the rows, where it saves time (docs/DECISIONS.md, "Working-set
// shrinking where the cache is small").
WorkingSetOptions working_set_options(int64_t budget, int64_t n) {
  WorkingSetOptions o;
  o.cache_bytes = std::max<int64_t>(0, budget - std::min<int64_t>(o.working_set_size, n) * n * 4);
  o.shrinking = o.cache_bytes / (n * 4) < n / 20;
  return o;
}

// Samples of one class gathered contiguously, with their squared norms.
struct ClassData {
  int label_index = -1;
  std::vector<float> X;
  std::vector<double> norms;
};

void gather_rows(const float* X, int dim, const std::vector<int64_t>& rows, const double* norms, float* out,
                 double* out_norms) {
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows.size()) * dim >= kMinParallelWork)
  for (int64_t r = 0; r < static_cast<int64_t>(rows.size()); ++r) {
    std::memcpy(out + r * dim, X + rows[r] * dim, sizeof(float) * static_cast<size_t>(dim));
    out_norms[r] = norms[rows[r]];
  }
}

// dst[j*ldd + i] = src[i*lds + j] for an [rows, cols] block, tile by tile.
void transpose_block(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst, int64_t ldd) {
  constexpr int64_t kTile = 64;
#pragma omp parallel for schedule(static) if (rows * cols >= kMinParallelWork)
  for (int64_t j0 = 0; j0 < cols; j0 += kTile)
    for (int64_t i0 = 0; i0 < rows; i0 += kTile)
      for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j)
        for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i) dst[j * ldd + i] = src[i * lds + j];
}

void copy_block(const float* src, int64_t n, float* dst, int64_t ldd) {
#pragma omp parallel for schedule(static) if (n * n >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ldd, src + i * n, sizeof(float) * static_cast<size_t>(n));
}

// Per-class diagonal blocks K_cc kept across pairs while they fit in the budget.
class DiagonalBlockCache {
 public:
  bool lookup(int c, float* dst, int64_t ldd, int64_t n) {
    auto it = blocks_.find(c);
    if (it == blocks_.end()) return false;
    touch(c);
    copy_block(it->second.data(), n, dst, ldd);
    return true;
  }
  // Keeps a copy when `limit_bytes` allows, evicting the least recently used classes.
  void offer(int c, const float* src, int64_t lds, int64_t n, int64_t limit_bytes) {
    const int64_t bytes = n * n * static_cast<int64_t>(sizeof(float));
    if (bytes > limit_bytes) return;
    while (used_ + bytes > limit_bytes && !order_.empty()) evict(order_.back());
    std::vector<float> block(static_cast<size_t>(n * n));
#pragma omp parallel for schedule(static) if (n * n >= kMinParallelWork)
    for (int64_t i = 0; i < n; ++i) std::memcpy(block.data() + i * n, src + i * lds, sizeof(float) * static_cast<size_t>(n));
    blocks_[c] = std::move(block);
    used_ += bytes;
    order_.push_front(c);
  }
  void shrink_to(int64_t limit_bytes) {
    while (used_ > limit_bytes && !order_.empty()) evict(order_.back());
  }

 private:
  void touch(int c) {
    order_.remove(c);
    order_.push_front(c);
  }
  void evict(int c) {
    auto it = blocks_.find(c);
    used_ -= static_cast<int64_t>(it->second.size() * sizeof(float));
    blocks_.erase(it);
    order_.remove(c);
  }
  std::map<int, std::vector<float>> blocks_;
  std::list<int> order_;  // most recent first
  int64_t used_ = 0;
};

}  // namespace
}  // namespace cpu

Model begin_fit(const int32_t* y, int64_t n, int dim, const FitParams& p, std::vector<std::vector<int64_t>>& members) {
  if (p.kind != SvmKind::c_svc) throw std::invalid_argument("svm: a one-vs-one fit needs kind c-svc");
  if (n < 2 || dim < 1) throw std::invalid_argument("svm: need at least 2 samples and 1 feature");
  if (!(p.C > 0)) throw std::invalid_argument("svm: C must be > 0");
  for (const auto& [label, w] : p.class_weight)
    if (!(w > 0) || !std::isfinite(w))
      throw std::invalid_argument("svm: the weight of class " + std::to_string(label) + " must be a finite number > 0");
  if (!(p.tol > 0)) throw std::invalid_argument("svm: tol must be > 0");
  if (p.kernel == KernelType::rbf && !(p.gamma > 0)) throw std::invalid_argument("svm: gamma must be > 0");
  if (n > INT32_MAX / 2) throw std::invalid_argument("svm: too many samples");

  Model m;
  m.kernel = p.kernel;
  m.gamma = p.kernel == KernelType::rbf ? p.gamma : 0.0;
  m.dim = dim;
  m.classes.assign(y, y + n);
  std::sort(m.classes.begin(), m.classes.end());
  m.classes.erase(std::unique(m.classes.begin(), m.classes.end()), m.classes.end());
  if (m.classes.size() < 2) throw std::invalid_argument("svm: the training labels hold a single class");
  members.assign(m.classes.size(), {});
  for (int64_t s = 0; s < n; ++s) {
    int c = static_cast<int>(std::lower_bound(m.classes.begin(), m.classes.end(), y[s]) - m.classes.begin());
    members[c].push_back(s);
  }
  return m;
}

std::vector<PairSolution> solve_pairs_cpu(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                                          const std::vector<int>& wanted, const PairCallback& cb) {
  using namespace cpu;
  std::vector<std::vector<int64_t>> members;
  Model m = begin_fit(y, n, dim, p, members);
  const int k = static_cast<int>(m.classes.size());
  const int pairs = k * (k - 1) / 2;
  std::vector<int> pair_a(pairs), pair_b(pairs);
  for (int a = 0, q = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++q) pair_a[q] = a, pair_b[q] = b;
  for (int q : wanted)
    if (q < 0 || q >= pairs) throw std::invalid_argument("svm: pair " + std::to_string(q) + " of " + std::to_string(pairs));

  const KernelSpec spec{p.kernel, p.gamma};
  std::vector<double> norms(static_cast<size_t>(n));
  row_squared_norms(X, n, dim, norms.data());

  const int64_t budget = std::max<int64_t>(p.cache_mb, 1) << 20;
  std::vector<PairSolution> out;
  out.reserve(wanted.size());

  DiagonalBlockCache diag_cache;
  std::vector<float> pair_matrix;
  ClassData da, db;
  double kernel_s = 0, solve_s = 0;
  int64_t iterations = 0;
  int dense_pairs = 0, working_set_pairs = 0;
  for (int pair : wanted) {
    const int a = pair_a[pair], b = pair_b[pair];
    // libsvm's weighted C: the product C · w (C · 1 == C, so unweighted fits are unchanged).
    const double Cp = p.C * class_weight(p.class_weight, m.classes[a]);
    const double Cn = p.C * class_weight(p.class_weight, m.classes[b]);
    {
      cae::Stopwatch t_kernel;
      const int64_t na = static_cast<int64_t>(members[a].size()), nb = static_cast<int64_t>(members[b].size());
      const int64_t np = na + nb;
      for (auto [cls, data] : {std::pair<int, ClassData*>{a, &da}, std::pair<int, ClassData*>{b, &db}}) {
        if (data->label_index == cls) continue;
        const auto& rows = members[cls];
        data->X.resize(rows.size() * static_cast<size_t>(dim));
        data->norms.resize(rows.size());
        gather_rows(X, dim, rows, norms.data(), data->X.data(), data->norms.data());
        data->label_index = cls;
      }
      std::vector<int8_t> ys(static_cast<size_t>(np), -1);
      std::fill(ys.begin(), ys.begin() + na, int8_t{1});

      BinaryResult r;
      const int64_t pair_bytes = np * np * static_cast<int64_t>(sizeof(float));
      if (pair_bytes <= budget) {
        ++dense_pairs;
        pair_matrix.resize(static_cast<size_t>(np * np));
        float* M = pair_matrix.data();
        diag_cache.shrink_to(budget - pair_bytes);
        for (auto [cls, data, off] : {std::tuple<int, ClassData*, int64_t>{a, &da, 0},
                                      std::tuple<int, ClassData*, int64_t>{b, &db, na}}) {
          const int64_t nc = static_cast<int64_t>(members[cls].size());
          float* dst = M + off * np + off;
          if (!diag_cache.lookup(cls, dst, np, nc)) {
            kernel_block_symmetric(spec, data->X.data(), nc, data->norms.data(), dim, dst, np);
            diag_cache.offer(cls, dst, np, nc, budget - pair_bytes);
          }
        }
        kernel_block(spec, da.X.data(), na, da.norms.data(), db.X.data(), nb, db.norms.data(), dim, M + na, np);
        transpose_block(M + na, np, na, nb, M + na * np, np);
        kernel_s += t_kernel.seconds();
        cae::Stopwatch t_solve;
        MatrixRows rows(M, static_cast<int>(np));
        r = solve_binary(rows, ys.data(), static_cast<int>(np), Cp, Cn, p.tol);
        solve_s += t_solve.seconds();
      } else {
        // The pair's samples side by side, their kernel rows computed as working sets need them.
        std::vector<float> Xp(static_cast<size_t>(np * dim));
        std::vector<double> np_norms(static_cast<size_t>(np));
        std::memcpy(Xp.data(), da.X.data(), sizeof(float) * static_cast<size_t>(na * dim));
        std::memcpy(Xp.data() + na * dim, db.X.data(), sizeof(float) * static_cast<size_t>(nb * dim));
        std::copy(da.norms.begin(), da.norms.end(), np_norms.begin());
        std::copy(db.norms.begin(), db.norms.end(), np_norms.begin() + na);
        diag_cache.shrink_to(0);
        pair_matrix.clear();
        pair_matrix.shrink_to_fit();
        kernel_s += t_kernel.seconds();
        cae::Stopwatch t_solve;
        PointKernelRows rows(spec, Xp.data(), np_norms.data(), static_cast<int>(np), dim);
        r = solve_binary_working_set(rows, ys.data(), Cp, Cn, p.tol, working_set_options(budget, np));
        solve_s += t_solve.seconds();
        ++working_set_pairs;
      }
      if (r.hit_iteration_limit)
        cae::log_warn("svm: pair (%d,%d) reached the iteration limit before tol %g", m.classes[a], m.classes[b], p.tol);
      iterations += r.iterations;
      PairSolution sol;
      sol.pair = pair;
      sol.alpha = std::move(r.alpha);
      sol.rho = r.rho;
      sol.iterations = r.iterations;
      sol.hit_iteration_limit = r.hit_iteration_limit;
      out.push_back(std::move(sol));
      if (cb) cb(static_cast<int>(out.size()), static_cast<int>(wanted.size()));
    }
  }
  if (p.log_summary)
    cae::log_info("svm: %zu pairs (%d with the whole kernel matrix in memory, %d by working sets within --cache-mb): "
                  "kernel blocks %.1f s, SMO %.1f s, %lld iterations",
                  wanted.size(), dense_pairs, working_set_pairs, kernel_s, solve_s, static_cast<long long>(iterations));
  return out;
}

Model assemble_model(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                     std::vector<PairSolution> solutions) {
  Model m = assemble_model_layout(y, n, dim, p, std::move(solutions));
  const int64_t n_sv = m.n_sv();
  m.support_vectors.resize(static_cast<size_t>(n_sv * dim));
#pragma omp parallel for schedule(static) if (n_sv * dim >= cpu::kMinParallelWork)
  for (int64_t v = 0; v < n_sv; ++v)
    std::memcpy(m.support_vectors.data() + v * dim, X + m.support_indices[v] * dim, sizeof(float) * static_cast<size_t>(dim));
  return m;
}

Model assemble_model_layout(const int32_t* y, int64_t n, int dim, const FitParams& p,
                            std::vector<PairSolution> solutions) {
  std::vector<std::vector<int64_t>> members;
  Model m = begin_fit(y, n, dim, p, members);
  const int k = static_cast<int>(m.classes.size());
  const int pairs = k * (k - 1) / 2;
  std::vector<std::vector<double>> pair_alpha(pairs);
  std::vector<uint8_t> seen(static_cast<size_t>(pairs), 0);
  m.rho.assign(pairs, 0.0);
  for (PairSolution& sol : solutions) {
    if (sol.pair < 0 || sol.pair >= pairs || seen[sol.pair])
      throw std::invalid_argument("assemble_model: pair " + std::to_string(sol.pair) + " is not one of the " +
                                  std::to_string(pairs) + " pairs, or comes twice");
    seen[sol.pair] = 1;
    pair_alpha[sol.pair] = std::move(sol.alpha);
    m.rho[sol.pair] = sol.rho;
  }
  int pair = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++pair)
      if (!seen[pair] || pair_alpha[pair].size() != members[a].size() + members[b].size())
        throw std::invalid_argument("assemble_model: pair " + std::to_string(pair) + " is missing or has " +
                                    std::to_string(pair_alpha[pair].size()) + " coefficients for " +
                                    std::to_string(members[a].size() + members[b].size()) + " rows");

  // libsvm's layout: a sample is a support vector when its coefficient is non-zero in any
  // pair; support vectors are grouped by class in training order.
  std::vector<uint8_t> is_sv(static_cast<size_t>(n), 0);
  pair = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++pair) {
      const auto& al = pair_alpha[pair];
      for (size_t t = 0; t < members[a].size(); ++t)
        if (al[t] > 0) is_sv[members[a][t]] = 1;
      for (size_t t = 0; t < members[b].size(); ++t)
        if (al[members[a].size() + t] > 0) is_sv[members[b][t]] = 1;
    }
  std::vector<int64_t> sv_pos(static_cast<size_t>(n), -1);
  m.n_support.assign(k, 0);
  for (int c = 0; c < k; ++c)
    for (int64_t s : members[c])
      if (is_sv[s]) {
        sv_pos[s] = static_cast<int64_t>(m.support_indices.size());
        m.support_indices.push_back(s);
        ++m.n_support[c];
      }
  const int64_t n_sv = m.n_sv();
  m.dual_coef.assign(static_cast<size_t>((k - 1) * n_sv), 0.0);
  pair = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++pair) {
      const auto& al = pair_alpha[pair];
      const size_t na = members[a].size();
      // Class a's vectors take their coefficient for this pair in row b−1, class b's in row a.
      for (size_t t = 0; t < na; ++t)
        if (sv_pos[members[a][t]] >= 0) m.dual_coef[static_cast<size_t>((b - 1) * n_sv + sv_pos[members[a][t]])] = al[t];
      for (size_t t = 0; t < members[b].size(); ++t)
        if (sv_pos[members[b][t]] >= 0) m.dual_coef[static_cast<size_t>(a * n_sv + sv_pos[members[b][t]])] = -al[na + t];
    }
  return m;
}

Model fit_cpu(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, const PairCallback& cb) {
  std::vector<std::vector<int64_t>> members;
  const Model m = begin_fit(y, n, dim, p, members);
  const int pairs = m.n_pairs();
  std::vector<int> all(static_cast<size_t>(pairs));
  for (int q = 0; q < pairs; ++q) all[q] = q;
  return assemble_model(X, y, n, dim, p, solve_pairs_cpu(X, y, n, dim, p, all, cb));
}

Model begin_one_class_fit(int64_t n, int dim, const FitParams& p) {
  if (p.kind != SvmKind::one_class) throw std::invalid_argument("svm: a one-class fit needs kind one-class");
  if (n < 1 || dim < 1) throw std::invalid_argument("svm: need at least 1 sample and 1 feature");
  if (!(p.nu > 0 && p.nu <= 1)) throw std::invalid_argument("svm: nu must be in (0, 1]");
  if (!(p.tol > 0)) throw std::invalid_argument("svm: tol must be > 0");
  if (p.kernel == KernelType::rbf && !(p.gamma > 0)) throw std::invalid_argument("svm: gamma must be > 0");
  if (n > INT32_MAX / 2) throw std::invalid_argument("svm: too many samples");
  Model m;
  m.kind = SvmKind::one_class;
  m.kernel = p.kernel;
  m.gamma = p.kernel == KernelType::rbf ? p.gamma : 0.0;
  m.dim = dim;
  return m;
}

void set_one_class_solution(Model& m, const float* X, const std::vector<double>& alpha, double rho) {
  const int64_t n = static_cast<int64_t>(alpha.size()), dim = m.dim;
  m.support_indices.clear();
  m.dual_coef.clear();
  for (int64_t s = 0; s < n; ++s)
    if (alpha[s] > 0) {
      m.support_indices.push_back(s);
      m.dual_coef.push_back(alpha[s]);
    }
  const int64_t n_sv = m.n_sv();
  m.n_support = {static_cast<int>(n_sv)};
  m.support_vectors.resize(static_cast<size_t>(n_sv * dim));
  for (int64_t v = 0; v < n_sv; ++v)
    std::memcpy(m.support_vectors.data() + v * dim, X + m.support_indices[v] * dim, sizeof(float) * static_cast<size_t>(dim));
  m.rho = {rho};
}

Model fit_one_class_cpu(const float* X, int64_t n, int dim, const FitParams& p) {
  using namespace cpu;
  Model m = begin_one_class_fit(n, dim, p);
  const KernelSpec spec{p.kernel, p.gamma};
  std::vector<double> norms(static_cast<size_t>(n));
  row_squared_norms(X, n, dim, norms.data());
  const int64_t budget = std::max<int64_t>(p.cache_mb, 1) << 20;
  cae::Stopwatch t_fit;
  BinaryResult r;
  if (n * n * static_cast<int64_t>(sizeof(float)) <= budget) {
    std::vector<float> M(static_cast<size_t>(n * n));
    kernel_block_symmetric(spec, X, n, norms.data(), dim, M.data(), n);
    MatrixRows rows(M.data(), static_cast<int>(n));
    r = solve_one_class(rows, static_cast<int>(n), p.nu, p.tol);
  } else {
    PointKernelRows rows(spec, X, norms.data(), static_cast<int>(n), dim);
    const std::vector<int8_t> ones(static_cast<size_t>(n), int8_t{1});
    r = solve_dual_working_set(rows, ones.data(), 1.0, 1.0, p.tol, 0.0, one_class_start(static_cast<int>(n), p.nu),
                               working_set_options(budget, n));
  }
  if (r.hit_iteration_limit) cae::log_warn("svm: the one-class fit reached the iteration limit before tol %g", p.tol);
  set_one_class_solution(m, X, r.alpha, r.rho);
  if (p.log_summary)
    cae::log_info("svm: one-class, nu %g: %lld support vectors of %lld rows, %lld iterations, %.1f s", p.nu,
                  static_cast<long long>(m.n_sv()), static_cast<long long>(n), static_cast<long long>(r.iterations),
                  t_fit.seconds());
  return m;
}

}  // namespace svm
