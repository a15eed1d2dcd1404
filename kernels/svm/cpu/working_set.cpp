// The working-set solver (working_set.h): rounds of selection, kernel rows, an SMO subproblem
// and a gradient update, over an LRU cache of kernel rows.
#include "kernels/svm/cpu/working_set.h"

#include "kernels/svm/row_cache.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

namespace svm::cpu {

void PointKernelRows::compute(const int* rows, int count, float* out) {
  // Batches of exactly kRowBatch rows (the last padded with its first): one shape, one of
  // OpenBLAS's code paths (it takes its small-matrix kernels for others). A row's last bits
  // can still depend on its place in the batch (working_set.h).
  gathered_.resize(static_cast<size_t>(kRowBatch) * dim_);
  gathered_norms_.resize(kRowBatch);
  for (int b0 = 0; b0 < count; b0 += kRowBatch) {
    const int in_batch = std::min(kRowBatch, count - b0);
    for (int r = 0; r < kRowBatch; ++r) {
      const int t = rows[b0 + (r < in_batch ? r : 0)];
      std::memcpy(gathered_.data() + static_cast<int64_t>(r) * dim_, X_ + static_cast<int64_t>(t) * dim_,
                  sizeof(float) * static_cast<size_t>(dim_));
      gathered_norms_[r] = norms_[t];
    }
    float* dst = out + static_cast<int64_t>(b0) * n_;
    if (in_batch < kRowBatch) {
      padded_.resize(static_cast<size_t>(kRowBatch) * n_);
      dst = padded_.data();
    }
    kernel_block(kernel_, gathered_.data(), kRowBatch, gathered_norms_.data(), X_, n_, norms_, dim_, dst, n_);
    if (in_batch < kRowBatch)
      std::memcpy(out + static_cast<int64_t>(b0) * n_, padded_.data(), sizeof(float) * static_cast<size_t>(in_batch) * n_);
  }
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Candidate {
  float key;
  int t;
};

// The first `count` candidates by key, largest first, ties to the smaller index.
void sort_top(std::vector<Candidate>& c, size_t count) {
  const auto before = [](const Candidate& a, const Candidate& b) { return a.key > b.key || (a.key == b.key && a.t < b.t); };
  count = std::min(count, c.size());
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(count), c.end(), before);
  c.resize(count);
}

}  // namespace

std::vector<int> select_working_set(const int8_t* y, const double* G, const double* alpha, const double* Cs, int n,
                                    int q, const std::vector<int>& kept, std::vector<int>* fresh) {
  q = std::min(q, n);
  std::vector<Candidate> up, low;
  for (int t = 0; t < n; ++t) {
    const bool positive = y[t] > 0, below = alpha[t] < Cs[t], above = alpha[t] > 0;
    const double yG = positive ? G[t] : -G[t];
    if (positive ? below : above) up.push_back({static_cast<float>(-yG), t});
    if (positive ? above : below) low.push_back({static_cast<float>(yG), t});
  }
  // At least two fresh, so the largest violator of each side is always in the set (the
  // subproblem's gap is then the problem's, and every round takes a step).
  const size_t k = std::min(kept.size(), static_cast<size_t>(std::max(0, std::min(q / 2, q - 2))));
  sort_top(up, static_cast<size_t>(q) + k);  // enough to skip every kept one
  sort_top(low, static_cast<size_t>(q) + k);
  std::vector<uint8_t> chosen(static_cast<size_t>(n), 0);
  std::vector<int> ws(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(k));
  ws.reserve(static_cast<size_t>(q));
  for (int t : ws) chosen[t] = 1;
  const size_t up_share = k + (static_cast<size_t>(q) - k) / 2, all = static_cast<size_t>(q);
  size_t u = 0;
  for (; u < up.size() && ws.size() < up_share; ++u)
    if (!chosen[up[u].t]) chosen[up[u].t] = 1, ws.push_back(up[u].t);
  for (size_t l = 0; l < low.size() && ws.size() < all; ++l)
    if (!chosen[low[l].t]) chosen[low[l].t] = 1, ws.push_back(low[l].t);
  for (; u < up.size() && ws.size() < all; ++u)
    if (!chosen[up[u].t]) chosen[up[u].t] = 1, ws.push_back(up[u].t);
  if (fresh) fresh->assign(ws.begin() + static_cast<std::ptrdiff_t>(k), ws.end());
  std::sort(ws.begin(), ws.end());
  return ws;
}

BinaryResult solve_dual_working_set(KernelRowSource& K, const int8_t* y, double Cp, double Cn, double tol,
                                    double linear, std::vector<double> alpha, const WorkingSetOptions& options,
                                    WorkingSetStats* stats) {
  const int n = K.size();
  const int q = std::max(2, std::min(options.working_set_size, n));
  WorkingSetStats st;
  std::vector<double> G(static_cast<size_t>(n), linear), Cs(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) Cs[t] = y[t] > 0 ? Cp : Cn;
  const int64_t row_bytes = static_cast<int64_t>(n) * static_cast<int64_t>(sizeof(float));
  RowSlots cache(n, static_cast<int>(std::min<int64_t>(n, q + std::max<int64_t>(options.cache_bytes, 0) / row_bytes)));
  std::vector<float> store(static_cast<size_t>(cache.capacity()) * n);
  const auto row_at = [&](int slot) { return store.data() + static_cast<int64_t>(slot) * n; };

  // G_t += y_t Σ_s y_s Δa_s K(s, t) over rows[r] (the kernel rows of vars[r]), for every t:
  // t's sum runs over r in order, tile by tile of t, so it is the same whatever the threads.
  std::vector<double> coef;
  auto add_to_gradient = [&](const std::vector<const float*>& rows) {
    constexpr int kTile = 512;
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(n) * static_cast<int64_t>(rows.size()) >= kMinParallelWork)
    for (int t0 = 0; t0 < n; t0 += kTile) {
      const int t1 = std::min(n, t0 + kTile);
      double acc[kTile] = {};
      for (size_t r = 0; r < rows.size(); ++r) {
        const float* Kr = rows[r];
        const double c = coef[r];
        for (int t = t0; t < t1; ++t) acc[t - t0] += c * static_cast<double>(Kr[t]);
      }
      for (int t = t0; t < t1; ++t) G[t] += (y[t] > 0 ? acc[t - t0] : -acc[t - t0]);
    }
  };

  // The rows of `vars` (distinct), from the cache or computed together; their pointers stay
  // valid until the next call.
  std::vector<int> missing;
  std::vector<float> fresh;
  auto rows_of = [&](const std::vector<int>& vars) {
    std::vector<const float*> rows(vars.size());
    missing.clear();
    for (int t : vars)
      if (cache.slot_of(t) >= 0) cache.touch(cache.slot_of(t)); else missing.push_back(t);
    if (!missing.empty()) {
      fresh.resize(missing.size() * static_cast<size_t>(n));
      K.compute(missing.data(), static_cast<int>(missing.size()), fresh.data());
      st.rows_computed += static_cast<int64_t>(missing.size());
      for (size_t r = 0; r < missing.size(); ++r) {
        float* dst = row_at(cache.take_for(missing[r]));
        std::memcpy(dst, fresh.data() + r * static_cast<size_t>(n), static_cast<size_t>(row_bytes));
        // The diagonal as the source states it (rbf: exactly 1), as the dense path stores it.
        dst[missing[r]] = static_cast<float>(K.diag(missing[r]));
      }
    }
    for (size_t r = 0; r < vars.size(); ++r) rows[r] = row_at(cache.slot_of(vars[r]));
    return rows;
  };

  // The start's gradient: Q·alpha from the rows of its non-zero multipliers, q at a time.
  {
    std::vector<int> nonzero;
    for (int t = 0; t < n; ++t)
      if (alpha[t] != 0) nonzero.push_back(t);
    for (size_t b0 = 0; b0 < nonzero.size(); b0 += static_cast<size_t>(q)) {
      const std::vector<int> batch(nonzero.begin() + static_cast<std::ptrdiff_t>(b0),
                                   nonzero.begin() + static_cast<std::ptrdiff_t>(std::min(nonzero.size(), b0 + q)));
      const std::vector<const float*> rows = rows_of(batch);
      coef.resize(batch.size());
      for (size_t r = 0; r < batch.size(); ++r) coef[r] = (y[batch[r]] > 0 ? 1.0 : -1.0) * alpha[batch[r]];
      add_to_gradient(rows);
    }
  }

  const int64_t max_iter = std::max<int64_t>(10000000, n > INT_MAX / 100 ? INT_MAX : 100LL * n);
  int64_t iter = 0;
  BinaryResult res;
  std::vector<float> Kbb;
  std::vector<int> kept, fresh_set;
  std::vector<int8_t> yB;
  std::vector<double> aB, GB;
  for (;;) {
    double m_up = -kInf, m_low = -kInf;  // m(a) and −M(a)
    for (int t = 0; t < n; ++t) {
      const bool positive = y[t] > 0, below = alpha[t] < Cs[t], above = alpha[t] > 0;
      const double yG = positive ? G[t] : -G[t];
      if (positive ? below : above) m_up = std::max(m_up, -yG);
      if (positive ? above : below) m_low = std::max(m_low, yG);
    }
    const double gap = m_up + m_low;
    if (!(gap >= tol)) break;  // converged, or one side empty (−inf)
    if (iter >= max_iter) {
      res.hit_iteration_limit = true;
      break;
    }
    // Half the set carries over: the variables the last round chose anew stay for this one
    // (ThunderSVM's rule), so a round does not undo the last; q/2 come fresh.
    const std::vector<int> B = select_working_set(y, G.data(), alpha.data(), Cs.data(), n, q, kept, &fresh_set);
    kept = fresh_set;
    const int b = static_cast<int>(B.size());
    const std::vector<const float*> rows = rows_of(B);
    Kbb.resize(static_cast<size_t>(b) * b);
    yB.resize(b);
    aB.resize(b);
    GB.resize(b);
    for (int r = 0; r < b; ++r) {
      for (int c = 0; c < b; ++c) Kbb[static_cast<size_t>(r) * b + c] = rows[r][B[c]];
      yB[r] = y[B[r]];
      aB[r] = alpha[B[r]];
      GB[r] = G[B[r]];
    }
    MatrixRows sub(Kbb.data(), b);  // Q_BB's kernel values, held by the round
    const BinaryResult inner =
        solve_dual(sub, yB.data(), b, Cp, Cn, std::max(tol, options.inner_gap_share * gap), linear, aB, GB.data(),
                   std::min<int64_t>(static_cast<int64_t>(options.inner_steps_per_variable) * b, max_iter - iter));
    ++st.rounds;
    iter += inner.iterations;
    if (inner.iterations == 0) {  // cannot happen (the set holds both largest violators); said, never silent
      res.hit_iteration_limit = true;
      break;
    }

    std::vector<const float*> moved;
    coef.clear();
    for (int r = 0; r < b; ++r) {
      const double delta = inner.alpha[r] - alpha[B[r]];
      if (delta == 0) continue;
      coef.push_back((yB[r] > 0 ? 1.0 : -1.0) * delta);
      moved.push_back(rows[r]);
      alpha[B[r]] = inner.alpha[r];
    }
    add_to_gradient(moved);
  }
  finish_dual(y, n, Cp, Cn, linear, G.data(), alpha.data(), res);
  res.iterations = iter;
  res.alpha = std::move(alpha);
  if (stats) *stats = st;
  return res;
}

}  // namespace svm::cpu
