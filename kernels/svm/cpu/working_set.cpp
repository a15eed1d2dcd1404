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

// The points of rows[0..in_batch) and their norms into gathered_ and gathered_norms_, the
// batch padded to kRowBatch with its first row: compute() and compute_columns() hand OpenBLAS
// one shape and gather it the same way.
void PointKernelRows::gather_batch(const int* rows, int in_batch) {
  for (int r = 0; r < kRowBatch; ++r) {
    const int t = rows[r < in_batch ? r : 0];
    std::memcpy(gathered_.data() + static_cast<int64_t>(r) * dim_, X_ + static_cast<int64_t>(t) * dim_,
                sizeof(float) * static_cast<size_t>(dim_));
    gathered_norms_[r] = norms_[t];
  }
}

void PointKernelRows::compute(const int* rows, int count, float* out) {
  // Batches of exactly kRowBatch rows (the last padded with its first): one shape, one of
  // OpenBLAS's code paths (it takes its small-matrix kernels for others). A row's last bits
  // can still depend on its place in the batch (working_set.h).
  gathered_.resize(static_cast<size_t>(kRowBatch) * dim_);
  gathered_norms_.resize(kRowBatch);
  for (int b0 = 0; b0 < count; b0 += kRowBatch) {
    const int in_batch = std::min(kRowBatch, count - b0);
    gather_batch(rows + b0, in_batch);
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

void KernelRowSource::compute_columns(const int* rows, int count, const int* cols, int ncols, float* out) {
  const int n = size();
  std::vector<float> whole(static_cast<size_t>(n));
  for (int r = 0; r < count; ++r) {
    compute(rows + r, 1, whole.data());
    for (int j = 0; j < ncols; ++j) out[static_cast<int64_t>(r) * ncols + j] = whole[cols[j]];
  }
}

void PointKernelRows::compute_columns(const int* rows, int count, const int* cols, int ncols, float* out) {
  // The columns' points gathered a chunk at a time (bounded memory, not a second copy of X),
  // each chunk against the rows in batches of kRowBatch as compute() makes them.
  constexpr int64_t kChunkBytes = 16 << 20;
  const int chunk = static_cast<int>(
      std::min<int64_t>(ncols, std::max<int64_t>(256, kChunkBytes / (static_cast<int64_t>(sizeof(float)) * dim_))));
  columns_.resize(static_cast<size_t>(chunk) * dim_);
  column_norms_.resize(static_cast<size_t>(chunk));
  gathered_.resize(static_cast<size_t>(kRowBatch) * dim_);
  gathered_norms_.resize(kRowBatch);
  padded_.resize(static_cast<size_t>(kRowBatch) * chunk);
  for (int j0 = 0; j0 < ncols; j0 += chunk) {
    const int width = std::min(chunk, ncols - j0);
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(width) * dim_ >= kMinParallelWork)
    for (int j = 0; j < width; ++j) {
      std::memcpy(columns_.data() + static_cast<int64_t>(j) * dim_, X_ + static_cast<int64_t>(cols[j0 + j]) * dim_,
                  sizeof(float) * static_cast<size_t>(dim_));
      column_norms_[j] = norms_[cols[j0 + j]];
    }
    for (int b0 = 0; b0 < count; b0 += kRowBatch) {
      const int in_batch = std::min(kRowBatch, count - b0);
      gather_batch(rows + b0, in_batch);
      float* dst = out + static_cast<int64_t>(b0) * ncols + j0;
      const bool whole = in_batch == kRowBatch;
      kernel_block(kernel_, gathered_.data(), kRowBatch, gathered_norms_.data(), columns_.data(), width,
                   column_norms_.data(), dim_, whole ? dst : padded_.data(), whole ? ncols : width);
      for (int r = 0; !whole && r < in_batch; ++r)
        std::memcpy(dst + static_cast<int64_t>(r) * ncols, padded_.data() + static_cast<int64_t>(r) * width,
                    sizeof(float) * static_cast<size_t>(width));
    }
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
                                    int q, const std::vector<int>& kept, std::vector<int>* fresh,
                                    const std::vector<int>* active) {
  const int n_active = active ? static_cast<int>(active->size()) : n;
  q = std::min(q, n_active);
  std::vector<Candidate> up, low;
  for (int i = 0; i < n_active; ++i) {
    const int t = active ? (*active)[i] : i;
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

  // The active set A (working_set.h, shrinking), ascending: every variable unless shrinking.
  std::vector<int> active(static_cast<size_t>(n));
  std::vector<uint8_t> is_active(static_cast<size_t>(n), 1);
  for (int t = 0; t < n; ++t) active[t] = t;
  const auto all_active = [&] { return static_cast<int>(active.size()) == n; };

  // A cached row holds K(t, ·) over all n, or only over the A it was computed for. A only
  // shrinks between two gradient rebuilds (an epoch), so a partial row of this epoch covers
  // today's A and an older one is computed again. A cache of every row computes them whole:
  // each is then computed once for the whole solve.
  int epoch = 0;
  std::vector<int> slot_epoch(static_cast<size_t>(cache.capacity()), -1);  // −1: the whole row
  const bool whole_rows = cache.capacity() == n;

  // G_t += y_t Σ_s y_s Δa_s K(s, t) over rows[r] (the kernel rows of vars[r]), for every t in A:
  // t's sum runs over r in order, tile by tile of A, so it is the same whatever the threads.
  std::vector<double> coef;
  auto add_to_gradient = [&](const std::vector<const float*>& rows) {
    constexpr int kTile = 512;
    const int na = static_cast<int>(active.size());
    const bool all = all_active();
    const int* idx = active.data();
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(na) * static_cast<int64_t>(rows.size()) >= kMinParallelWork)
    for (int i0 = 0; i0 < na; i0 += kTile) {
      const int i1 = std::min(na, i0 + kTile);
      double acc[kTile] = {};
      for (size_t r = 0; r < rows.size(); ++r) {
        const float* Kr = rows[r];
        const double c = coef[r];
        if (all)
          for (int i = i0; i < i1; ++i) acc[i - i0] += c * static_cast<double>(Kr[i]);
        else
          for (int i = i0; i < i1; ++i) acc[i - i0] += c * static_cast<double>(Kr[idx[i]]);
      }
      for (int i = i0; i < i1; ++i) {
        const int t = all ? i : idx[i];
        G[t] += (y[t] > 0 ? acc[i - i0] : -acc[i - i0]);
      }
    }
  };

  // The rows of `vars` (distinct, in A), from the cache or computed together (over A when A is
  // not every variable); their pointers stay valid until the next call.
  std::vector<int> missing, missing_slot;
  std::vector<float> fresh;
  auto rows_of = [&](const std::vector<int>& vars) {
    std::vector<const float*> rows(vars.size());
    missing.clear();
    missing_slot.clear();
    for (int t : vars) {
      const int slot = cache.slot_of(t);
      if (slot >= 0) {
        cache.touch(slot);  // before any take_for below, so no row of this call is evicted
        if (slot_epoch[slot] < 0 || slot_epoch[slot] == epoch) continue;
      }
      missing.push_back(t);
      missing_slot.push_back(slot);
    }
    if (!missing.empty()) {
      const int count = static_cast<int>(missing.size());
      const bool whole = whole_rows || all_active();
      const int width = whole ? n : static_cast<int>(active.size());
      fresh.resize(static_cast<size_t>(count) * width);
      if (whole)
        K.compute(missing.data(), count, fresh.data());
      else
        K.compute_columns(missing.data(), count, active.data(), width, fresh.data());
      st.rows_computed += count;
      st.kernel_values += static_cast<int64_t>(count) * width;
      for (int r = 0; r < count; ++r) {
        const int slot = missing_slot[r] >= 0 ? missing_slot[r] : cache.take_for(missing[r]);
        float* dst = row_at(slot);
        const float* src = fresh.data() + static_cast<int64_t>(r) * width;
        if (whole) {
          std::memcpy(dst, src, static_cast<size_t>(row_bytes));
        } else {
          for (int j = 0; j < width; ++j) dst[active[j]] = src[j];
        }
        slot_epoch[slot] = whole ? -1 : epoch;
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

  // m(a) and −M(a) over A.
  double m_up = -kInf, m_low = -kInf;
  auto extremes = [&] {
    m_up = -kInf;
    m_low = -kInf;
    for (int t : active) {
      const bool positive = y[t] > 0, below = alpha[t] < Cs[t], above = alpha[t] > 0;
      const double yG = positive ? G[t] : -G[t];
      if (positive ? below : above) m_up = std::max(m_up, -yG);
      if (positive ? above : below) m_low = std::max(m_low, yG);
    }
  };

  // libsvm's be_shrunk, from m(a) and M(a) as extremes() left them: a variable at a bound can
  // join no violating pair, an I_low-only one with −y_t G_t > m(a), an I_up-only one with
  // −y_t G_t < M(a).
  auto can_leave = [&](int t) {
    const bool positive = y[t] > 0, below = alpha[t] < Cs[t], above = alpha[t] > 0;
    const double yG = positive ? G[t] : -G[t];
    const bool in_up = positive ? below : above;
    return !(below && above) && (in_up ? -yG < -m_low : -yG > m_up);
  };
  auto shrink = [&] {
    size_t w = 0;
    for (const int t : active) {
      if (can_leave(t))
        is_active[t] = 0;
      else
        active[w++] = t;
    }
    st.shrunk += static_cast<int64_t>(active.size() - w);
    active.resize(w);
  };

  // Every variable active again, the stale gradients rebuilt (working_set.h), m(a) and M(a) over all n:
  // G_t = linear + y_t Σ_{s: a_s ≠ 0} y_s a_s K(x_s, x_t) for t ∉ A. An s whose whole row is
  // cached adds from it; the others' K(s, ∉ A) are computed q rows at a time, and complete a
  // cached row of this epoch (it covers A, they the rest), which then stays valid as a whole
  // row. t's sum runs over the cached s, then the computed, in ascending order of s.
  auto make_all_active = [&] {
    std::vector<int> inactive, computed;
    std::vector<const float*> cached;
    std::vector<double> cached_coef;
    for (int t = 0; t < n; ++t) {
      if (!is_active[t]) inactive.push_back(t);
      if (alpha[t] == 0) continue;
      const int slot = cache.slot_of(t);
      if (slot >= 0 && slot_epoch[slot] < 0) {
        cached.push_back(row_at(slot));
        cached_coef.push_back((y[t] > 0 ? 1.0 : -1.0) * alpha[t]);
      } else {
        computed.push_back(t);
      }
    }
    const int ni = static_cast<int>(inactive.size());
    if (ni == 0) return;
    std::vector<int> column_of(static_cast<size_t>(n), -1);
    for (int j = 0; j < ni; ++j) column_of[inactive[j]] = j;
    for (int t : inactive) G[t] = linear;
    // G_t += y_t Σ_r coef[r] · value(r, j) for t = inactive[j], over `count` rows.
    auto add_to_inactive = [&](int count, const auto& value) {
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(ni) * count >= kMinParallelWork)
      for (int j = 0; j < ni; ++j) {
        double acc = 0;
        for (int r = 0; r < count; ++r) acc += coef[r] * static_cast<double>(value(r, j));
        const int t = inactive[j];
        G[t] += (y[t] > 0 ? acc : -acc);
      }
    };
    coef = cached_coef;
    add_to_inactive(static_cast<int>(cached.size()), [&](int r, int j) { return cached[r][inactive[j]]; });
    for (size_t b0 = 0; b0 < computed.size(); b0 += static_cast<size_t>(q)) {
      const int count = static_cast<int>(std::min(computed.size() - b0, static_cast<size_t>(q)));
      const int* rows = computed.data() + b0;
      fresh.resize(static_cast<size_t>(count) * ni);
      K.compute_columns(rows, count, inactive.data(), ni, fresh.data());
      st.kernel_values += static_cast<int64_t>(count) * ni;
      coef.resize(static_cast<size_t>(count));
      for (int r = 0; r < count; ++r) {
        const float* src = fresh.data() + static_cast<size_t>(r) * ni;
        if (const int j = column_of[rows[r]]; j >= 0)  // the diagonal as the source states it, as rows hold it
          fresh[static_cast<size_t>(r) * ni + j] = static_cast<float>(K.diag(rows[r]));
        coef[r] = (y[rows[r]] > 0 ? 1.0 : -1.0) * alpha[rows[r]];
        const int slot = cache.slot_of(rows[r]);
        if (slot >= 0 && slot_epoch[slot] == epoch) {
          float* dst = row_at(slot);
          for (int j = 0; j < ni; ++j) dst[inactive[j]] = src[j];
          slot_epoch[slot] = -1;
        }
      }
      add_to_inactive(count, [&](int r, int j) { return fresh[static_cast<size_t>(r) * ni + j]; });
    }
    st.unshrunk += ni;
    ++st.reconstructions;
    ++epoch;
    active.resize(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) active[t] = t, is_active[t] = 1;
    extremes();
    for (int t : inactive) st.brought_back += !can_leave(t);
  };

  const int64_t max_iter = std::max<int64_t>(10000000, n > INT_MAX / 100 ? INT_MAX : 100LL * n);
  int64_t iter = 0;
  BinaryResult res;
  std::vector<float> Kbb;
  std::vector<int> kept, fresh_set;
  std::vector<int8_t> yB;
  std::vector<double> aB, GB;
  bool unshrunk_near = false;  // libsvm's one unshrink at 10·tol
  for (;;) {
    extremes();
    double gap = m_up + m_low;
    // A's gap at tol, or first within 10·tol: the stale gradients rebuilt and the test over all n.
    if (!all_active() && (!(gap >= tol) || (!unshrunk_near && gap < 10 * tol))) {
      make_all_active();
      gap = m_up + m_low;
    }
    if (gap < 10 * tol) unshrunk_near = true;
    if (!(gap >= tol)) break;  // converged, or one side empty (−inf)
    if (iter >= max_iter) {
      res.hit_iteration_limit = true;
      break;
    }
    if (options.shrinking && st.rounds > 0) shrink();
    // Half the set carries over: the variables the last round chose anew stay for this one
    // (ThunderSVM's rule), so a round does not undo the last; q/2 come fresh.
    if (!all_active()) kept.erase(std::remove_if(kept.begin(), kept.end(), [&](int t) { return !is_active[t]; }), kept.end());
    const std::vector<int> B = select_working_set(y, G.data(), alpha.data(), Cs.data(), n, q, kept, &fresh_set,
                                                  all_active() ? nullptr : &active);
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
  make_all_active();  // after an iteration limit: finish_dual reads every gradient
  finish_dual(y, n, Cp, Cn, linear, G.data(), alpha.data(), res);
  res.iterations = iter;
  res.alpha = std::move(alpha);
  if (stats) *stats = st;
  return res;
}

}  // namespace svm::cpu
