#include "kernels/svm/libsvm_format.h"

#include <libsvm/svm.h>
#include <sys/stat.h>
#include <unistd.h>

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
#include "common/memory_limit.h"

namespace svm {

using cae::fail_file;

namespace {

// A label as libsvm reads it (strtod) that is an integer: its canonical spelling ("+1.0"
// and "1" are both "1"), so the same class is one name whichever way a file wrote it.
bool canonical_label(const char* text, std::string& out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 2e9)
    return false;
  out = std::to_string(static_cast<int64_t>(v));
  return true;
}

bool is_integer_name(const std::string& s) {
  std::string canonical;
  return canonical_label(s.c_str(), canonical) && canonical == s;
}

// What the dense matrix may take: physical memory, or the cgroup's limit when smaller.
uint64_t memory_available() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  const uint64_t cgroup = cae::cgroup_memory_limit();
  if (cgroup && (!bytes || cgroup < bytes)) bytes = cgroup;
  return bytes ? bytes : std::numeric_limits<uint64_t>::max();
}

struct SparseEntry {
  int64_t row;
  int index;  // 0-based
  float value;
};

}  // namespace

bool is_libsvm_text(const std::string& path) {
  // A FIFO or a device would block the read below (or never end): refused by name first.
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail_file(path, "is not a regular file (a FIFO, socket or device?), expected a features file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_file(path, "cannot open");
  static const char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  in.read(head, 8);
  return in.gcount() < 8 || std::memcmp(head, kHdf5Signature, 8) != 0;
}

LibsvmData read_libsvm_data(const std::string& path, const std::vector<std::string>& classes, int min_dim) {
  std::ifstream in(path);
  if (!in) fail_file(path, "cannot open");
  // The entries as read (memory follows the file's bytes), densified once the width is known.
  std::vector<SparseEntry> entries;
  std::vector<std::string> row_label;
  int max_index = 0;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto bad = [&](const std::string& what) {
      fail_file(path, "line " + std::to_string(line_no) + ": " + what + " (libsvm format: label index:value ...)");
    };
    size_t at = line.find_first_not_of(" \t");
    if (at == std::string::npos) continue;  // blank line
    size_t end = line.find_first_of(" \t", at);
    std::string label;
    if (!canonical_label(line.substr(at, end - at).c_str(), label))
      bad("label '" + line.substr(at, end - at) + "' is not an integer");
    const int64_t row = static_cast<int64_t>(row_label.size());
    row_label.push_back(label);
    int previous = 0;
    while (end != std::string::npos) {
      at = line.find_first_not_of(" \t", end);
      if (at == std::string::npos) break;
      end = line.find_first_of(" \t", at);
      const std::string token = line.substr(at, end - at);
      const size_t colon = token.find(':');
      if (colon == std::string::npos) bad("'" + token + "' is not index:value");
      char* stop = nullptr;
      errno = 0;
      const long index = std::strtol(token.c_str(), &stop, 10);
      if (stop != token.c_str() + colon || errno != 0 || index < 1 || index > std::numeric_limits<int>::max() / 2)
        bad("'" + token + "' has no index in 1.." + std::to_string(std::numeric_limits<int>::max() / 2));
      if (index <= previous) bad("index " + std::to_string(index) + " after " + std::to_string(previous) +
                                 " (indices must ascend)");
      previous = static_cast<int>(index);
      const char* value_text = token.c_str() + colon + 1;
      const double value = std::strtod(value_text, &stop);
      if (stop == value_text || *stop != '\0') bad("'" + token + "' has no number after ':'");
      if (!std::isfinite(static_cast<float>(value))) bad("'" + token + "' is not a finite float32 value");
      max_index = std::max(max_index, previous);
      if (value != 0) entries.push_back({row, previous - 1, static_cast<float>(value)});
    }
  }
  if (in.bad()) fail_file(path, "read error");
  if (row_label.empty()) fail_file(path, "has no rows (libsvm format: label index:value ...)");

  LibsvmData d;
  d.n = static_cast<int64_t>(row_label.size());
  d.dim = std::max({max_index, min_dim, 1});
  // Class indices: the given classes first, the file's other labels after them, ascending.
  d.class_names = classes;
  std::map<std::string, int32_t> index_of;
  for (size_t c = 0; c < classes.size(); ++c) index_of.emplace(classes[c], static_cast<int32_t>(c));
  std::vector<std::pair<int64_t, std::string>> extra;
  for (const std::string& label : row_label)
    if (!index_of.count(label)) {
      extra.emplace_back(std::stoll(label), label);
      index_of.emplace(label, -1);
    }
  std::sort(extra.begin(), extra.end());
  for (const auto& e : extra) {
    index_of[e.second] = static_cast<int32_t>(d.class_names.size());
    d.class_names.push_back(e.second);
  }
  d.labels.reserve(row_label.size());
  for (const std::string& label : row_label) d.labels.push_back(index_of[label]);

  const uint64_t dense_bytes = static_cast<uint64_t>(d.n) * static_cast<uint64_t>(d.dim) * sizeof(float);
  if (dense_bytes / sizeof(float) / static_cast<uint64_t>(d.dim) != static_cast<uint64_t>(d.n) ||
      dense_bytes > memory_available() / 2)
    fail_file(path, std::to_string(d.n) + " rows of " + std::to_string(d.dim) + " features need " +
                        std::to_string(dense_bytes >> 20) + " MiB dense, more than half of this machine's memory");
  d.X.assign(static_cast<size_t>(d.n) * static_cast<size_t>(d.dim), 0.0f);
  for (const SparseEntry& e : entries) d.X[static_cast<size_t>(e.row) * d.dim + e.index] = e.value;
  return d;
}

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
