#include "kernels/svm/preprocess.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common/error.h"

namespace svm {

namespace {
constexpr int64_t kColumnBlock = 256;  // columns per task: long contiguous reads per row
constexpr int64_t kMinParallelWork = int64_t{1} << 18;  // below this a loop stays on one thread
}

namespace {
// Row r's columns [f0, f0 + w) (w ≤ kColumnBlock) as floats: in the rows themselves, or their
// halves widened into `buf`.
inline const float* row_columns(const float* X, int64_t r, int dim, int64_t f0, int64_t, float*) {
  return X + r * dim + f0;
}
inline const float* row_columns(const cae::Half* X, int64_t r, int dim, int64_t f0, int64_t w, float* buf) {
  cae::halves_to_floats(X + r * dim + f0, buf, static_cast<size_t>(w));
  return buf;
}

template <typename T>
Scaler fit_standard_scaler_of(const T* X, int64_t n, int dim) {
  Scaler s;
  s.mean.assign(dim, 0.0);
  s.scale.assign(dim, 1.0);
  const double eps = std::numeric_limits<double>::epsilon();
  const double dn = static_cast<double>(n);
#pragma omp parallel for schedule(dynamic, 1) if (n * dim >= kMinParallelWork)
  for (int64_t f0 = 0; f0 < dim; f0 += kColumnBlock) {
    const int64_t f1 = std::min<int64_t>(dim, f0 + kColumnBlock), w = f1 - f0;
    std::vector<double> sum(w, 0.0), corr(w, 0.0), sq(w, 0.0);
    float widened[kColumnBlock];
    for (int64_t r = 0; r < n; ++r) {
      const float* x = row_columns(X, r, dim, f0, w, widened);
      for (int64_t f = 0; f < w; ++f) sum[f] += x[f];
    }
    for (int64_t f = 0; f < w; ++f) sum[f] /= dn;  // now the mean
    // Corrected two-pass variance (Chan, Golub & LeVeque), as sklearn computes it.
    for (int64_t r = 0; r < n; ++r) {
      const float* x = row_columns(X, r, dim, f0, w, widened);
      for (int64_t f = 0; f < w; ++f) {
        const double d = static_cast<double>(x[f]) - sum[f];
        corr[f] += d;
        sq[f] = std::fma(d, d, sq[f]);
      }
    }
    for (int64_t f = 0; f < w; ++f) {
      const double mean = sum[f];
      const double var = (sq[f] - corr[f] * corr[f] / dn) / dn;
      // sklearn's test for a feature indistinguishable from a constant one: scale 1 then.
      const double t = dn * mean * eps;
      const double bound = std::fma(dn * eps, var, t * t);
      s.mean[f0 + f] = mean;
      s.scale[f0 + f] = var <= bound ? 1.0 : std::sqrt(var);
    }
  }
  return s;
}
}  // namespace

Scaler fit_standard_scaler(RawRows X, int64_t n, int dim) {
  return X.f16 ? fit_standard_scaler_of(X.f16, n, dim) : fit_standard_scaler_of(X.f32, n, dim);
}

Scaler identity_scaler(int dim) { return Scaler{std::vector<double>(dim, 0.0), std::vector<double>(dim, 1.0)}; }

void apply_scaler(const Scaler& s, float* X, int64_t n, int dim) {
  // numpy on a float32 array: X -= mean; X /= scale — each op in double, rounded to float32.
#pragma omp parallel for schedule(static) if (n * dim >= kMinParallelWork)
  for (int64_t r = 0; r < n; ++r) {
    float* x = X + r * dim;
    for (int f = 0; f < dim; ++f) {
      const float centred = static_cast<float>(static_cast<double>(x[f]) - s.mean[f]);
      x[f] = static_cast<float>(static_cast<double>(centred) / s.scale[f]);
    }
  }
}

GammaSpec parse_gamma_spec(const std::string& spec) {
  if (spec == "scale") return {GammaSpec::Kind::scale, 1.0};
  if (spec == "auto") return {GammaSpec::Kind::auto_dim, 1.0};
  // "<m>x": m times scale. The suffix is checked first so that "2x" is not read as a bad
  // number; "x" alone and "-1x" are refused below like any other bad factor.
  const bool multiple = !spec.empty() && spec.back() == 'x';
  const std::string number = multiple ? spec.substr(0, spec.size() - 1) : spec;
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(v) || std::isspace(static_cast<unsigned char>(number[0])))
    throw cae::UsageError("--gamma must be 'scale', 'auto', a multiple of scale such as '0.5x', or a number > 0, not '" +
                          spec + "'");
  if (!(v > 0)) throw cae::UsageError("--gamma must be > 0, not " + spec);
  return {multiple ? GammaSpec::Kind::scale : GammaSpec::Kind::number, v};
}

double resolve_gamma(const GammaSpec& g, double scale_value, int dim) {
  switch (g.kind) {
    case GammaSpec::Kind::scale: return g.value * scale_value;
    case GammaSpec::Kind::auto_dim: return 1.0 / static_cast<double>(dim);
    case GammaSpec::Kind::number: break;
  }
  return g.value;
}

int64_t compaction_batch_end(int64_t r0, int64_t n, int dim, int kept) {
  return std::min(n, std::max(r0 + 1, r0 * dim / kept));  // r1·kept ≤ r0·dim, or one row
}

std::vector<int> kept_columns(const std::vector<uint8_t>& keep) {
  std::vector<int> kept;
  for (size_t f = 0; f < keep.size(); ++f)
    if (keep[f]) kept.push_back(static_cast<int>(f));
  return kept;
}

int compact_features(float* X, int64_t n, int dim, const std::vector<uint8_t>& keep) {
  const std::vector<int> kept = kept_columns(keep);
  const int dk = static_cast<int>(kept.size());
  if (dk == dim || dk == 0) return dk;  // nothing to move
  // Row r moves from offset r·dim to r·dk. Within a row, going forward never overwrites a
  // value still to be read (dk ≤ dim, kept[i] ≥ i). Rows [r0, r1) move at once, on every
  // core, once the rows before r0 have moved, when r1·dk ≤ r0·dim: the batch's destinations
  // then end before its first source begins. The batches grow by dim/dk each time (about
  // 75 of them for 50,000 rows with a tenth of the features dropped); one row at a time
  // while r0·(dim − dk) < dk.
  for (int64_t r0 = 0; r0 < n;) {
    const int64_t r1 = compaction_batch_end(r0, n, dim, dk);
#pragma omp parallel for schedule(static) if ((r1 - r0) * dim >= kMinParallelWork)
    for (int64_t r = r0; r < r1; ++r) {
      const float* src = X + r * dim;
      float* dst = X + r * dk;
      for (int i = 0; i < dk; ++i) dst[i] = src[kept[i]];
    }
    r0 = r1;
  }
  return dk;
}

namespace {

constexpr int kRowGroup = 4;  // rows whose sums are taken side by side

// Each of kRowGroup rows' sum over its columns, in column order, of x (mu unset) or of
// (x − mu)²: the same additions as one row at a time, but four independent chains of them,
// so the adder's latency is not the bound. Rows past `count` repeat the last one.
void row_group_sums(const float* X, int64_t r, int count, int dim, const double* mu, double* out) {
  const float* x[kRowGroup];
  for (int i = 0; i < kRowGroup; ++i) x[i] = X + (r + std::min(i, count - 1)) * dim;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  if (mu) {
    const double m = *mu;
    for (int f = 0; f < dim; ++f) {
      const double d0 = static_cast<double>(x[0][f]) - m, d1 = static_cast<double>(x[1][f]) - m;
      const double d2 = static_cast<double>(x[2][f]) - m, d3 = static_cast<double>(x[3][f]) - m;
      s0 = std::fma(d0, d0, s0), s1 = std::fma(d1, d1, s1), s2 = std::fma(d2, d2, s2), s3 = std::fma(d3, d3, s3);
    }
  } else {
    for (int f = 0; f < dim; ++f) s0 += x[0][f], s1 += x[1][f], s2 += x[2][f], s3 += x[3][f];
  }
  const double s[kRowGroup] = {s0, s1, s2, s3};
  for (int i = 0; i < count; ++i) out[i] = s[i];
}

void scale_row(const Scaler& sc, float* x, int dim) {
  for (int f = 0; f < dim; ++f) {
    const float centred = static_cast<float>(static_cast<double>(x[f]) - sc.mean[f]);
    x[f] = static_cast<float>(static_cast<double>(centred) / sc.scale[f]);
  }
}

}  // namespace

PreparedRows prepare_training_rows(float* X, int64_t n, int dim, bool standardize) {
  return prepare_training_rows(X, n, dim, standardize ? fit_standard_scaler(X, n, dim) : identity_scaler(dim));
}

PreparedRows prepare_training_rows(float* X, int64_t n, int dim, Scaler scaler) {
  PreparedRows p;
  p.scaler = std::move(scaler);
  p.keep.assign(static_cast<size_t>(std::max(dim, 0)), 0);
  if (n <= 0 || dim <= 0) return p;
  const int64_t total = n * dim;
  // Pass 1, rows [1, n) in groups: each row scaled (apply_scaler's arithmetic) and compared
  // with the scaled row 0 (constant_feature_mask), then the group's row sums taken
  // (gamma_scale's first pass). Row 0 goes first: the others compare with it.
  std::vector<double> row_sum(static_cast<size_t>(n));
  scale_row(p.scaler, X, dim);
  row_group_sums(X, 0, 1, dim, nullptr, row_sum.data());
  const int64_t groups = (n - 1 + kRowGroup - 1) / kRowGroup;
#pragma omp parallel if (total >= kMinParallelWork)
  {
    std::vector<uint8_t> differs(static_cast<size_t>(dim), 0);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r = 1 + g * kRowGroup;
      const int count = static_cast<int>(std::min<int64_t>(kRowGroup, n - r));
      for (int i = 0; i < count; ++i) {
        float* x = X + (r + i) * dim;
        scale_row(p.scaler, x, dim);
        for (int f = 0; f < dim; ++f) differs[f] |= static_cast<uint8_t>(x[f] != X[f]);
      }
      row_group_sums(X, r, count, dim, nullptr, row_sum.data() + r);
    }
#pragma omp critical
    for (int f = 0; f < dim; ++f) p.keep[f] |= differs[f];
  }
  for (int f = 0; f < dim; ++f)
    if (!p.keep[f]) p.dropped_values.push_back(X[f]);
  const double mean = mean_of_row_sums(row_sum, dim);

  // Pass 2, in compact_features' batches: each row's squared deviations from the mean over
  // all its columns (gamma_scale's second pass), then its kept columns moved to the front.
  // A batch's destinations end before its first row, and within a group row r's end before
  // row r + 1 begins: no row is overwritten before it is read.
  const std::vector<int> kept = kept_columns(p.keep);
  p.kept = static_cast<int>(kept.size());
  const bool move = p.kept != dim && p.kept != 0;
  for (int64_t r0 = 0; r0 < n;) {
    const int64_t r1 = move ? compaction_batch_end(r0, n, dim, p.kept) : n;
    const int64_t batch_groups = (r1 - r0 + kRowGroup - 1) / kRowGroup;
#pragma omp parallel for schedule(static) if ((r1 - r0) * dim >= kMinParallelWork)
    for (int64_t g = 0; g < batch_groups; ++g) {
      const int64_t r = r0 + g * kRowGroup;
      const int count = static_cast<int>(std::min<int64_t>(kRowGroup, r1 - r));
      row_group_sums(X, r, count, dim, &mean, row_sum.data() + r);
      for (int i = 0; move && i < count; ++i) {
        const float* src = X + (r + i) * dim;
        float* dst = X + (r + i) * p.kept;
        for (int k = 0; k < p.kept; ++k) dst[k] = src[kept[k]];
      }
    }
    r0 = r1;
  }
  p.gamma_scale = gamma_scale_of_row_sums(row_sum, dim);
  return p;
}

double mean_of_row_sums(const std::vector<double>& row_sum, int dim) {
  double sum = 0;
  for (double s : row_sum) sum += s;
  return sum / static_cast<double>(static_cast<int64_t>(row_sum.size()) * dim);
}

double gamma_scale_of_row_sums(const std::vector<double>& squared_row_sum, int dim) {
  double sq = 0;
  for (double s : squared_row_sum) sq += s;
  const double var = sq / static_cast<double>(static_cast<int64_t>(squared_row_sum.size()) * dim);
  return var != 0 ? 1.0 / (static_cast<double>(dim) * var) : 1.0;
}

void scaled_kept_rows(const PreparedRows& prepared, RawRows X, int dim, const int64_t* rows, int64_t count,
                      float* out) {
  const std::vector<int> kept = kept_columns(prepared.keep);
  const Scaler& sc = prepared.scaler;
  const int dk = static_cast<int>(kept.size());
#pragma omp parallel if (count * dk >= kMinParallelWork)
  {
    std::vector<float> widened(X.f16 ? static_cast<size_t>(dim) : 0);  // a float16 row, widened
#pragma omp for schedule(static)
    for (int64_t v = 0; v < count; ++v) {
      const float* x = X.f32 ? X.f32 + rows[v] * dim : widened.data();
      if (X.f16) cae::halves_to_floats(X.f16 + rows[v] * dim, widened.data(), static_cast<size_t>(dim));
      float* o = out + v * dk;
      for (int i = 0; i < dk; ++i) {  // scale_row's arithmetic
        const int f = kept[i];
        const float centred = static_cast<float>(static_cast<double>(x[f]) - sc.mean[f]);
        o[i] = static_cast<float>(static_cast<double>(centred) / sc.scale[f]);
      }
    }
  }
}

std::vector<double> dropped_feature_distance(const float* X, int64_t n, int dim, const std::vector<uint8_t>& keep,
                                             const std::vector<float>& dropped_values) {
  std::vector<int> dropped;
  for (int f = 0; f < dim; ++f)
    if (!keep[f]) dropped.push_back(f);
  std::vector<double> e(static_cast<size_t>(n), 0.0);
  if (dropped.empty()) return e;
#pragma omp parallel for schedule(static) if (n * static_cast<int64_t>(dropped.size()) >= kMinParallelWork)
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    for (size_t i = 0; i < dropped.size(); ++i) {
      const double d = static_cast<double>(X[r * dim + dropped[i]]) - dropped_values[i];
      s += d * d;
    }
    e[r] = s;
  }
  return e;
}

void correct_for_dropped_features(const Model& m, const std::vector<double>& e, double* dec, int64_t n) {
  if (m.kernel != KernelType::rbf) return;
  const int pairs = m.n_decisions();
  for (int64_t r = 0; r < n; ++r) {
    if (e[r] == 0) continue;
    const double factor = std::exp(-m.gamma * e[r]);
    for (int p = 0; p < pairs; ++p) dec[r * pairs + p] = factor * (dec[r * pairs + p] + m.rho[p]) - m.rho[p];
  }
}

}  // namespace svm
