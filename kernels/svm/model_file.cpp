#include "kernels/svm/model_file.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "common/atomic_output.h"
#include "common/error.h"

namespace cae {

// ---- features --------------------------------------------------------------------------------
FeaturesReader::FeaturesReader(const std::string& path) : h5_(path) { h5_.require_format("ae-features"); }

bool FeaturesReader::has_split(const std::string& split) const { return h5_.has("/" + split + "/features"); }

int64_t FeaturesReader::count(const std::string& split) const {
  if (!has_split(split)) fail_file(path(), "/" + split + "/features is missing (no '" + split + "' split in this file)");
  return static_cast<int64_t>(h5_.require("/" + split + "/features", {0, 0})[0]);
}

int FeaturesReader::dim(const std::string& split) const {
  count(split);
  uint64_t d = h5_.shape("/" + split + "/features")[1];
  if (d == 0 || d > static_cast<uint64_t>(std::numeric_limits<int>::max() / 2))
    fail_file(path(), "/" + split + "/features has " + std::to_string(d) + " features per row");
  return static_cast<int>(d);
}

std::vector<std::string> FeaturesReader::class_names() const {
  if (h5_.has_attr("/", "class_names")) return h5_.attr_strings("/", "class_names");
  std::vector<std::string> names;
  for (int c = 0; c < 10; ++c) names.push_back(std::to_string(c));
  return names;
}

FeatureSplit FeaturesReader::read(const std::string& split, int64_t rows) const {
  const std::string feat = "/" + split + "/features", lab = "/" + split + "/labels";
  const int64_t n_all = count(split);
  const int d = dim(split);
  if (!h5_.has(lab)) fail_file(path(), lab + " is missing: the SVM needs labelled features");
  h5_.require(lab, {static_cast<uint64_t>(n_all)});
  if (rows < 0 || rows > n_all) rows = n_all;
  FeatureSplit s;
  s.n = rows;
  s.dim = d;
  std::vector<uint8_t> labels(static_cast<size_t>(rows));
  h5_.read_rows<uint8_t>(lab, 0, static_cast<uint64_t>(rows), labels.data());
  const size_t n_classes = class_names().size();
  s.labels.resize(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= n_classes)
      fail_file(path(), lab + "[" + std::to_string(i) + "] = " + std::to_string(labels[i]) + " is not a class 0.." +
                            std::to_string(n_classes - 1));
    s.labels[i] = labels[i];
  }
  h5_.read_rows<float>(feat, 0, 0, nullptr);  // dtype and stored data checked before sizing the buffer
  s.X.resize(static_cast<size_t>(rows) * static_cast<size_t>(d));
  h5_.read_rows<float>(feat, 0, static_cast<uint64_t>(rows), s.X.data());
  // The first non-finite value, if any (NaN or Inf would poison every kernel value).
  const int64_t none = std::numeric_limits<int64_t>::max();
  int64_t bad = none;
#pragma omp parallel for schedule(static) reduction(min : bad) if (rows * d >= (int64_t{1} << 18))
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = s.X.data() + r * d;
    for (int f = 0; f < d; ++f)
      if (!std::isfinite(x[f])) {
        bad = std::min(bad, r * d + f);
        break;
      }
  }
  if (bad != none)
    fail_file(path(), feat + " row " + std::to_string(bad / d) + " feature " + std::to_string(bad % d) + " is " +
                          (std::isnan(s.X[static_cast<size_t>(bad)]) ? "NaN" : "infinite") +
                          " (features must be finite)");
  return s;
}

// ---- scaling, mask, gamma ---------------------------------------------------------------------
namespace {
constexpr int64_t kColumnBlock = 256;  // columns per task: long contiguous reads per row
constexpr int64_t kMinParallelWork = int64_t{1} << 18;  // below this a loop stays on one thread
}

Scaler fit_standard_scaler(const float* X, int64_t n, int dim) {
  Scaler s;
  s.mean.assign(dim, 0.0);
  s.scale.assign(dim, 1.0);
  const double eps = std::numeric_limits<double>::epsilon();
  const double dn = static_cast<double>(n);
#pragma omp parallel for schedule(dynamic, 1) if (n * dim >= kMinParallelWork)
  for (int64_t f0 = 0; f0 < dim; f0 += kColumnBlock) {
    const int64_t f1 = std::min<int64_t>(dim, f0 + kColumnBlock), w = f1 - f0;
    std::vector<double> sum(w, 0.0), corr(w, 0.0), sq(w, 0.0);
    for (int64_t r = 0; r < n; ++r) {
      const float* x = X + r * dim + f0;
      for (int64_t f = 0; f < w; ++f) sum[f] += x[f];
    }
    for (int64_t f = 0; f < w; ++f) sum[f] /= dn;  // now the mean
    // Corrected two-pass variance (Chan, Golub & LeVeque), as sklearn computes it.
    for (int64_t r = 0; r < n; ++r) {
      const float* x = X + r * dim + f0;
      for (int64_t f = 0; f < w; ++f) {
        const double d = static_cast<double>(x[f]) - sum[f];
        corr[f] += d;
        sq[f] += d * d;
      }
    }
    for (int64_t f = 0; f < w; ++f) {
      const double mean = sum[f];
      const double var = (sq[f] - corr[f] * corr[f] / dn) / dn;
      // sklearn's test for a feature indistinguishable from a constant one: scale 1 then.
      const double bound = dn * eps * var + (dn * mean * eps) * (dn * mean * eps);
      s.mean[f0 + f] = mean;
      s.scale[f0 + f] = var <= bound ? 1.0 : std::sqrt(var);
    }
  }
  return s;
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

double gamma_scale(const float* X, int64_t n, int dim) {
  // numpy's X.var(): mean first, then the mean squared deviation, in double. Row sums are
  // added in row order so the result does not depend on the thread count.
  const int64_t total = n * dim;
  std::vector<double> row_sum(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (total >= kMinParallelWork)
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    for (int f = 0; f < dim; ++f) s += X[r * dim + f];
    row_sum[r] = s;
  }
  double sum = 0;
  for (double s : row_sum) sum += s;
  const double mean = sum / static_cast<double>(total);
#pragma omp parallel for schedule(static) if (total >= kMinParallelWork)
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    for (int f = 0; f < dim; ++f) {
      const double d = static_cast<double>(X[r * dim + f]) - mean;
      s += d * d;
    }
    row_sum[r] = s;
  }
  double sq = 0;
  for (double s : row_sum) sq += s;
  const double var = sq / static_cast<double>(total);
  return var != 0 ? 1.0 / (static_cast<double>(dim) * var) : 1.0;
}

double resolve_gamma(const std::string& spec, const float* X, int64_t n, int dim) {
  if (spec == "scale") return gamma_scale(X, n, dim);
  if (spec == "auto") return 1.0 / static_cast<double>(dim);
  char* end = nullptr;
  const double g = std::strtod(spec.c_str(), &end);
  if (spec.empty() || *end != '\0' || !std::isfinite(g))
    throw UsageError("--gamma must be 'scale', 'auto' or a number > 0, not '" + spec + "'");
  if (!(g > 0)) throw UsageError("--gamma must be > 0, not " + spec);
  return g;
}

std::vector<uint8_t> constant_feature_mask(const float* X, int64_t n, int dim, std::vector<float>* dropped_values) {
  std::vector<uint8_t> keep(dim, 0);
#pragma omp parallel for schedule(dynamic, 1) if (n * dim >= kMinParallelWork)
  for (int64_t f0 = 0; f0 < dim; f0 += kColumnBlock) {
    const int64_t f1 = std::min<int64_t>(dim, f0 + kColumnBlock);
    for (int64_t r = 1; r < n; ++r) {
      const float* x = X + r * dim;
      for (int64_t f = f0; f < f1; ++f)
        if (x[f] != X[f]) keep[f] = 1;
    }
  }
  if (dropped_values) {
    dropped_values->clear();
    for (int f = 0; f < dim; ++f)
      if (!keep[f]) dropped_values->push_back(n > 0 ? X[f] : 0.0f);
  }
  return keep;
}

int compact_features(float* X, int64_t n, int dim, const std::vector<uint8_t>& keep) {
  std::vector<int> kept;
  for (int f = 0; f < dim; ++f)
    if (keep[f]) kept.push_back(f);
  const int dk = static_cast<int>(kept.size());
  if (dk == dim) return dim;
  // Row r moves to offset r*dk ≤ r*dim: going forward never overwrites unread data.
  for (int64_t r = 0; r < n; ++r) {
    const float* src = X + r * dim;
    float* dst = X + r * dk;
    for (int i = 0; i < dk; ++i) dst[i] = src[kept[i]];
  }
  return dk;
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

void correct_for_dropped_features(const svm::Model& m, const std::vector<double>& e, double* dec, int64_t n) {
  if (m.kernel != svm::KernelType::rbf) return;
  const int pairs = m.n_pairs();
  for (int64_t r = 0; r < n; ++r) {
    if (e[r] == 0) continue;
    const double factor = std::exp(-m.gamma * e[r]);
    for (int p = 0; p < pairs; ++p) dec[r * pairs + p] = factor * (dec[r * pairs + p] + m.rho[p]) - m.rho[p];
  }
}

// ---- the svm-model file ----------------------------------------------------------------------
void write_svm_model(Hdf5Writer& w, const SvmModelFile& f) {
  const svm::Model& m = f.model;
  const uint64_t D = f.feature_mask.size(), n_sv = static_cast<uint64_t>(m.n_sv()), k = m.classes.size();
  w.write("/scaler/mean", f.scaler.mean);
  w.write("/scaler/scale", f.scaler.scale);
  w.write("/svm/feature_mask", f.feature_mask);
  w.write("/svm/dropped_values", f.dropped_values);
  w.write("/svm/support_vectors", m.support_vectors.data(), {n_sv, static_cast<uint64_t>(m.dim)});
  w.write("/svm/dual_coef", m.dual_coef.data(), {k - 1, n_sv});
  w.write("/svm/rho", m.rho);
  w.write("/svm/n_support", m.n_support);
  w.write("/svm/classes", m.classes);
  w.write("/svm/support_indices", m.support_indices);
  w.set_attr("/", "kernel", svm::kernel_name(m.kernel));
  w.set_attr("/", "C", f.C);
  w.set_attr("/", "gamma", m.gamma);
  w.set_attr("/", "gamma_spec", f.gamma_spec);
  w.set_attr("/", "tol", f.tol);
  w.set_attr("/", "n_train", f.n_train);
  w.set_attr("/", "n_features", static_cast<int64_t>(D));
  w.set_attr("/", "n_features_kept", static_cast<int64_t>(m.dim));
  w.set_attr("/", "fit_seconds", f.fit_seconds);
  w.set_attr("/", "device", f.device);
  w.set_attr("/", "class_names", f.class_names);
}

SvmModelFile read_svm_model(const std::string& path) {
  Hdf5Reader h5(path);
  h5.require_format("svm-model");
  SvmModelFile f;
  svm::Model& m = f.model;
  const std::string kernel = h5.attr_string("/", "kernel");
  if (kernel == "rbf") m.kernel = svm::KernelType::rbf;
  else if (kernel == "linear") m.kernel = svm::KernelType::linear;
  else fail_file(path, "unknown kernel '" + kernel + "'");
  m.gamma = h5.attr_double("/", "gamma");
  if (m.kernel == svm::KernelType::rbf && !(m.gamma > 0 && std::isfinite(m.gamma)))
    fail_file(path, "gamma must be a positive number");

  f.scaler.mean = h5.read<double>("/scaler/mean", {0});
  const uint64_t D = f.scaler.mean.size();
  if (D == 0) fail_file(path, "/scaler/mean is empty");
  f.scaler.scale = h5.read<double>("/scaler/scale", {D});
  f.feature_mask = h5.read<uint8_t>("/svm/feature_mask", {D});
  uint64_t kept = 0;
  for (uint8_t v : f.feature_mask) {
    if (v > 1) fail_file(path, "/svm/feature_mask holds values other than 0 and 1");
    kept += v;
  }
  if (kept == 0) fail_file(path, "/svm/feature_mask keeps no feature");
  f.dropped_values = h5.read<float>("/svm/dropped_values", {D - kept});
  m.dim = static_cast<int>(kept);
  m.classes = h5.read<int32_t>("/svm/classes", {0});
  const uint64_t k = m.classes.size();
  if (k < 2) fail_file(path, "/svm/classes holds fewer than two classes");
  for (size_t c = 1; c < k; ++c)
    if (m.classes[c] <= m.classes[c - 1]) fail_file(path, "/svm/classes is not strictly ascending");
  m.n_support = h5.read<int32_t>("/svm/n_support", {k});
  int64_t n_sv = 0;
  for (int32_t c : m.n_support) {
    if (c < 0) fail_file(path, "/svm/n_support holds a negative count");
    n_sv += c;
  }
  m.support_vectors = h5.read<float>("/svm/support_vectors", {static_cast<uint64_t>(n_sv), kept});
  m.dual_coef = h5.read<double>("/svm/dual_coef", {k - 1, static_cast<uint64_t>(n_sv)});
  m.rho = h5.read<double>("/svm/rho", {k * (k - 1) / 2});
  m.support_indices = h5.read<int64_t>("/svm/support_indices", {static_cast<uint64_t>(n_sv)});
  for (double s : f.scaler.scale)
    if (!(s > 0) || !std::isfinite(s)) fail_file(path, "/scaler/scale holds a non-positive or non-finite value");
  // A NaN anywhere below poisons decision values silently (every vote goes one way), so a
  // damaged model is refused here rather than reported as a poor accuracy.
  auto require_finite = [&](const char* name, const auto& values) {
    for (auto v : values)
      if (!std::isfinite(v)) fail_file(path, std::string(name) + " holds NaN or Inf");
  };
  require_finite("/scaler/mean", f.scaler.mean);
  require_finite("/svm/dropped_values", f.dropped_values);
  require_finite("/svm/support_vectors", m.support_vectors);
  require_finite("/svm/dual_coef", m.dual_coef);
  require_finite("/svm/rho", m.rho);

  f.gamma_spec = h5.has_attr("/", "gamma_spec") ? h5.attr_string("/", "gamma_spec") : "";
  f.C = h5.attr_double("/", "C");
  f.tol = h5.attr_double("/", "tol");
  f.n_train = h5.attr_int("/", "n_train");
  f.fit_seconds = h5.has_attr("/", "fit_seconds") ? h5.attr_double("/", "fit_seconds") : 0.0;
  f.device = h5.has_attr("/", "device") ? h5.attr_string("/", "device") : "";
  if (h5.has_attr("/", "class_names")) f.class_names = h5.attr_strings("/", "class_names");
  return f;
}

void write_libsvm_model(const AtomicOutput& out, const SvmModelFile& f) {
  const svm::Model& m = f.model;
  std::unique_ptr<FILE, int (*)(FILE*)> fp(fopen(out.temp_path().c_str(), "w"), fclose);
  if (!fp) fail_file(out.final_path(), "cannot create file");
  FILE* o = fp.get();
  const int k = static_cast<int>(m.classes.size());
  const int64_t n_sv = m.n_sv();
  fprintf(o, "svm_type c_svc\nkernel_type %s\n", svm::kernel_name(m.kernel));
  if (m.kernel == svm::KernelType::rbf) fprintf(o, "gamma %.17g\n", m.gamma);
  fprintf(o, "nr_class %d\ntotal_sv %" PRId64 "\nrho", k, n_sv);
  for (double r : m.rho) fprintf(o, " %.17g", r);
  fprintf(o, "\nlabel");
  for (int c : m.classes) fprintf(o, " %d", c);
  fprintf(o, "\nnr_sv");
  for (int c : m.n_support) fprintf(o, " %d", c);
  fprintf(o, "\nSV\n");
  const int D = f.n_features();
  for (int64_t v = 0; v < n_sv; ++v) {
    for (int r = 0; r < k - 1; ++r) fprintf(o, "%.17g ", m.dual_coef[static_cast<size_t>(r * n_sv + v)]);
    // Feature indices of the full scaled input (1-based); dropped features carry their
    // training value, zeros are left out as libsvm's sparse format allows.
    const float* sv = m.support_vectors.data() + v * m.dim;
    int kept_i = 0, dropped_i = 0;
    for (int feat = 0; feat < D; ++feat) {
      const float x = f.feature_mask[feat] ? sv[kept_i++] : f.dropped_values[dropped_i++];
      if (x != 0) fprintf(o, "%d:%.9g ", feat + 1, static_cast<double>(x));
    }
    fputc('\n', o);
  }
  if (ferror(o) || fflush(o) != 0) fail_file(out.final_path(), "write failed");
}

void write_libsvm_data(const AtomicOutput& out, const float* X, const int32_t* labels, int64_t n, int dim) {
  std::unique_ptr<FILE, int (*)(FILE*)> fp(fopen(out.temp_path().c_str(), "w"), fclose);
  if (!fp) fail_file(out.final_path(), "cannot create file");
  FILE* o = fp.get();
  for (int64_t r = 0; r < n; ++r) {
    fprintf(o, "%d", labels[r]);
    const float* x = X + r * dim;
    for (int feat = 0; feat < dim; ++feat)
      if (x[feat] != 0) fprintf(o, " %d:%.9g", feat + 1, static_cast<double>(x[feat]));
    fputc('\n', o);
  }
  if (ferror(o) || fflush(o) != 0) fail_file(out.final_path(), "write failed");
}

}  // namespace cae
