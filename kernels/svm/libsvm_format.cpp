#include "kernels/svm/libsvm_format.h"

#include <libsvm/svm.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

#include "common/error.h"
#include "common/log.h"

namespace svm {

using cae::fail_file;

namespace {

bool is_integer_name(const std::string& s) {
  std::string canonical;
  return cae::canonical_libsvm_label(s.c_str(), canonical) && canonical == s;
}

}  // namespace

LibsvmRange read_libsvm_range(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_file(path, "cannot open");
  std::string line;
  auto bad = [&](const std::string& what) { fail_file(path, what + " (svm-scale -s range file)"); };
  if (!std::getline(in, line)) bad("is empty");
  if (line.rfind("y", 0) == 0) bad("scales the labels (svm-scale -y): a classifier's labels are not scaled");
  if (line.rfind("x", 0) != 0) bad("does not start with 'x'");
  double lower = 0, upper = 0;
  if (!(in >> lower >> upper) || !std::isfinite(lower) || !std::isfinite(upper) || !(lower < upper))
    bad("the line after 'x' is not 'lower upper' with lower < upper");
  std::map<int, std::pair<double, double>> ranges;
  long index = 0;
  double lo = 0, hi = 0;
  while (in >> index >> lo >> hi) {
    if (index < 1 || index > std::numeric_limits<int>::max() / 2 || !std::isfinite(lo) || !std::isfinite(hi) ||
        ranges.count(static_cast<int>(index)))
      bad("line '" + std::to_string(index) + " ...' is not a new 'index min max'");
    ranges[static_cast<int>(index)] = {lo, hi};
  }
  if (!in.eof()) bad("has a line that is not 'index min max'");
  LibsvmRange r;
  r.dim = ranges.empty() ? 0 : ranges.rbegin()->first;
  if (static_cast<uint64_t>(r.dim) * 16 > 64 * static_cast<uint64_t>(ranges.size()) + (uint64_t{1} << 30))
    bad("lists index " + std::to_string(r.dim) + " among only " + std::to_string(ranges.size()) + " features");
  // svm-scale leaves a feature whose min equals its max (or that the file does not list)
  // out of its output: 0. An infinite scale gives the Scaler that same 0.
  r.offset.assign(static_cast<size_t>(r.dim), 0.0);
  r.scale.assign(static_cast<size_t>(r.dim), std::numeric_limits<double>::infinity());
  for (const auto& [i, mm] : ranges) {
    if (mm.first == mm.second) continue;
    const double s = (mm.second - mm.first) / (upper - lower);
    r.scale[static_cast<size_t>(i - 1)] = s;
    r.offset[static_cast<size_t>(i - 1)] = mm.first - lower * s;
  }
  return r;
}

namespace {

struct FreeModel {
  void operator()(svm_model* m) const { svm_free_and_destroy_model(&m); }
};

// The header of a libsvm model, checked before svm_load_model sizes anything from it: a
// nr_class or total_sv larger than the file could hold is refused here.
void check_model_header(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_file(path, "cannot open");
  std::string line;
  if (!std::getline(in, line) || line.rfind("svm_type ", 0) != 0)
    fail_file(path, "is not a libsvm model file (it does not start with 'svm_type')");
  int64_t nr_class = -1, total_sv = -1, sv_lines = -1;
  do {
    if (sv_lines >= 0) {
      ++sv_lines;
      continue;
    }
    if (line == "SV" || line == "SV\r") sv_lines = 0;
    else if (line.rfind("nr_class ", 0) == 0) nr_class = std::atoll(line.c_str() + 9);
    else if (line.rfind("total_sv ", 0) == 0) total_sv = std::atoll(line.c_str() + 9);
  } while (std::getline(in, line));
  if (nr_class < 2 || nr_class > 65536) fail_file(path, "nr_class must be 2..65536 (a c_svc model)");
  if (total_sv < 1 || sv_lines < total_sv)
    fail_file(path, "total_sv " + std::to_string(total_sv) + " but " + std::to_string(std::max<int64_t>(sv_lines, 0)) +
                        " support vector lines (truncated file?)");
}

}  // namespace

ModelFile import_libsvm_model(const std::string& path, const LibsvmRange* range, int dim) {
  check_model_header(path);
  std::unique_ptr<svm_model, FreeModel> lm(svm_load_model(path.c_str()));
  if (!lm) fail_file(path, "libsvm cannot read this model (svm_load_model failed)");
  if (lm->param.svm_type != C_SVC) fail_file(path, "is not a c_svc model (svm-train -s 0): only classifiers are read");
  if (lm->param.kernel_type != RBF && lm->param.kernel_type != LINEAR)
    fail_file(path, "has a kernel other than rbf or linear (svm-train -t 0 or -t 2)");
  const int k = lm->nr_class;
  const int64_t l = lm->l;
  int max_index = range ? range->dim : 0;
  for (int64_t v = 0; v < l; ++v)
    for (const svm_node* x = lm->SV[v]; x->index != -1; ++x) {
      if (x->index < 1) fail_file(path, "support vector " + std::to_string(v + 1) + " has an index below 1");
      max_index = std::max(max_index, x->index);
    }
  const int D = std::max({dim, max_index, 1});

  // The toolkit's classes ascending: position a holds libsvm's class order[a].
  std::vector<int> order(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return lm->label[a] < lm->label[b]; });
  std::vector<int64_t> start(static_cast<size_t>(k) + 1, 0);  // libsvm's SV block of each class
  for (int i = 0; i < k; ++i) start[i + 1] = start[i] + lm->nSV[i];
  auto libsvm_pair = [k](int i, int j) {  // i < j, libsvm's (and the toolkit's) pair order
    return i * (2 * k - i - 1) / 2 + (j - i - 1);
  };

  ModelFile f;
  Model& m = f.model;
  m.kernel = lm->param.kernel_type == RBF ? KernelType::rbf : KernelType::linear;
  m.gamma = m.kernel == KernelType::rbf ? lm->param.gamma : 0.0;
  m.dim = D;
  m.support_vectors.assign(static_cast<size_t>(l) * D, 0.0f);
  m.dual_coef.assign(static_cast<size_t>(k - 1) * l, 0.0);
  m.rho.assign(static_cast<size_t>(k) * (k - 1) / 2, 0.0);
  std::vector<int64_t> new_start(static_cast<size_t>(k) + 1, 0);
  for (int a = 0; a < k; ++a) {
    m.classes.push_back(a);
    m.n_support.push_back(lm->nSV[order[a]]);
    f.class_names.push_back(std::to_string(lm->label[order[a]]));
    new_start[a + 1] = new_start[a] + lm->nSV[order[a]];
    for (int64_t t = 0; t < lm->nSV[order[a]]; ++t)
      for (const svm_node* x = lm->SV[start[order[a]] + t]; x->index != -1; ++x)
        m.support_vectors[static_cast<size_t>(new_start[a] + t) * D + (x->index - 1)] = static_cast<float>(x->value);
  }
  const bool probability = lm->probA && lm->probB;
  if (probability) f.prob_A.assign(m.rho.size(), 0.0), f.prob_B.assign(m.rho.size(), 0.0);
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b) {
      // libsvm's pair of these classes, and whether its decision votes the other way.
      const int i = std::min(order[a], order[b]), j = std::max(order[a], order[b]);
      const double sign = order[a] < order[b] ? 1.0 : -1.0;
      const int q_old = libsvm_pair(i, j), q_new = libsvm_pair(a, b);
      m.rho[q_new] = sign * lm->rho[q_old];
      if (probability) {
        f.prob_A[q_new] = lm->probA[q_old];
        f.prob_B[q_new] = sign * lm->probB[q_old];  // P(a | f) = 1 − P(b | −f)
      }
      // Class a's coefficients in the pair sit in row b − 1, class b's in row a (both
      // layouts); libsvm's: class i's in row j − 1, class j's in row i.
      for (int64_t t = 0; t < lm->nSV[order[a]]; ++t)
        m.dual_coef[static_cast<size_t>(b - 1) * l + new_start[a] + t] =
            sign * lm->sv_coef[order[a] == i ? j - 1 : i][start[order[a]] + t];
      for (int64_t t = 0; t < lm->nSV[order[b]]; ++t)
        m.dual_coef[static_cast<size_t>(a) * l + new_start[b] + t] =
            sign * lm->sv_coef[order[b] == i ? j - 1 : i][start[order[b]] + t];
    }
  for (int64_t v = 0; v < l; ++v) m.support_indices.push_back(v);  // libsvm's file does not keep them

  f.feature_mask.assign(static_cast<size_t>(D), 1);
  f.scaler.mean.assign(static_cast<size_t>(D), 0.0);
  f.scaler.scale.assign(static_cast<size_t>(D), 1.0);
  if (range) {
    std::copy(range->offset.begin(), range->offset.end(), f.scaler.mean.begin());
    std::copy(range->scale.begin(), range->scale.end(), f.scaler.scale.begin());
    // Indices beyond the range file: svm-scale scales them to 0.
    std::fill(f.scaler.scale.begin() + range->dim, f.scaler.scale.end(), std::numeric_limits<double>::infinity());
  }
  f.gamma_spec = m.kernel == KernelType::rbf ? cae::strprintf("%.17g", m.gamma) : "scale";
  f.C = std::nan("");
  f.device = "libsvm";
  return f;
}

int libsvm_label(const std::vector<std::string>& class_names, int c) {
  for (const std::string& name : class_names)
    if (!is_integer_name(name)) return c;
  return c < static_cast<int>(class_names.size()) ? std::stoi(class_names[c]) : c;
}

void save_libsvm_model(const cae::AtomicOutput& out, const ModelFile& f) {
  const Model& m = f.model;
  // libsvm keeps a one-class model as two "classes" with no labels and no per-class counts.
  const bool one_class = m.kind == SvmKind::one_class;
  const int k = one_class ? 2 : static_cast<int>(m.classes.size());
  const int64_t n_sv = m.n_sv();
  const int D = f.n_features();
  // The support vectors over all D scaled features, sparse as libsvm keeps them; dropped
  // features carry their training value.
  std::vector<std::vector<svm_node>> rows(static_cast<size_t>(n_sv));
  std::vector<svm_node*> sv(static_cast<size_t>(n_sv));
  for (int64_t v = 0; v < n_sv; ++v) {
    const float* x = m.support_vectors.data() + v * m.dim;
    int kept_i = 0, dropped_i = 0;
    for (int feat = 0; feat < D; ++feat) {
      const float value = f.feature_mask[feat] ? x[kept_i++] : f.dropped_values[dropped_i++];
      if (value != 0) rows[v].push_back({feat + 1, static_cast<double>(value)});
    }
    rows[v].push_back({-1, 0.0});
    sv[v] = rows[v].data();
  }
  std::vector<double> dual(m.dual_coef), rho(m.rho), prob_A(f.prob_A), prob_B(f.prob_B);
  std::vector<double*> sv_coef(static_cast<size_t>(k - 1));
  for (int r = 0; r < k - 1; ++r) sv_coef[r] = dual.data() + static_cast<size_t>(r) * n_sv;
  std::vector<int> label, n_support(m.n_support);
  for (int c : m.classes) label.push_back(libsvm_label(f.class_names, c));

  svm_model lm{};
  lm.param.svm_type = one_class ? ONE_CLASS : C_SVC;
  lm.param.kernel_type = m.kernel == KernelType::rbf ? RBF : LINEAR;
  lm.param.gamma = m.gamma;
  lm.nr_class = k;
  lm.l = static_cast<int>(n_sv);
  lm.SV = sv.data();
  lm.sv_coef = sv_coef.data();
  lm.rho = rho.data();
  lm.probA = f.has_probability() ? prob_A.data() : nullptr;
  lm.probB = f.has_probability() ? prob_B.data() : nullptr;
  lm.label = one_class ? nullptr : label.data();
  lm.nSV = one_class ? nullptr : n_support.data();
  lm.free_sv = 0;
  if (svm_save_model(out.temp_path().c_str(), &lm) != 0) fail_file(out.final_path(), "write failed");
}

}  // namespace svm
