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
#include <new>
#include <set>
#include <string_view>

#include "common/error.h"
#include "common/log.h"
#include "common/memory_limit.h"

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
  cae::require_memory(path, "index " + std::to_string(r.dim) + " (the largest listed): its offsets and scales",
                      uint64_t{16} * static_cast<uint64_t>(r.dim));
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

// A libsvm model's text as read. libsvm's own svm_load_model trusts its header (an absent
// rho, an nr_sv that disagrees with total_sv, a short support-vector line: each is a read
// out of bounds) and prints its complaints to stderr, so the toolkit reads the text itself
// and checks every field before anything is sized from it.
struct LibsvmModelText {
  KernelType kernel = KernelType::rbf;
  double gamma = 0;
  int k = 0;  // nr_class
  int64_t l = 0;  // total_sv
  std::vector<int> label, n_sv;          // [k], libsvm's class order
  std::vector<double> rho, prob_A, prob_B;  // [k(k-1)/2], libsvm's pair order
  std::vector<double> coef;              // [l, k-1], as each support vector's line lists them
  std::vector<int64_t> sv_start{0};      // [l+1]: support vector v's entries
  std::vector<int> index;                // 1-based, ascending within a support vector
  std::vector<float> value;
  int max_index = 0;
  int64_t max_index_line = 0;
};

// The header fields of a c_svc model as svm_save_model writes them, "SV" ending the header.
// degree and coef0 belong to the kernels refused below; they are read and ignored.
const char* const kHeaderFields[] = {"svm_type", "kernel_type", "degree", "gamma", "coef0", "nr_class",
                                     "total_sv", "rho", "label", "probA", "probB", "nr_sv"};

class ModelTextReader {
 public:
  explicit ModelTextReader(const std::string& path) : path_(path), in_(path) {
    if (!in_) fail_file(path, "cannot open");
  }

  LibsvmModelText read() {
    try {
      read_header();
      check_header();
      read_support_vectors();
    } catch (const std::bad_alloc&) {
      fail_file(path_, "line " + std::to_string(line_no_) + ": the model read so far takes more than " +
                           cae::memory_headroom().limit + " allows");
    }
    return std::move(t_);
  }

 private:
  struct Field {
    std::vector<std::string> values;
    int64_t line = 0;
  };

  [[noreturn]] void bad_at(int64_t line, const std::string& what) const {
    fail_file(path_, "line " + std::to_string(line) + ": " + what + " (libsvm model)");
  }
  [[noreturn]] void missing(const char* name) const {
    fail_file(path_, "has no '" + std::string(name) + "' line before 'SV' (libsvm model header)");
  }

  // The next line that is not blank, split at spaces and tabs into views of line_ (each
  // followed by a separator or the string's end, so strtod and strtoll stop there); false
  // at the end of the file.
  bool next_tokens(std::vector<std::string_view>& tokens) {
    while (std::getline(in_, line_)) {
      ++line_no_;
      tokens.clear();
      size_t at = 0;
      while ((at = line_.find_first_not_of(" \t\r", at)) != std::string::npos) {
        const size_t end = std::min(line_.find_first_of(" \t\r", at), line_.size());
        tokens.emplace_back(line_.data() + at, end - at);
        at = end;
      }
      if (!tokens.empty()) return true;
    }
    if (in_.bad()) fail_file(path_, "read error");
    return false;
  }

  void read_header() {
    std::vector<std::string_view> tokens;
    if (!next_tokens(tokens) || tokens[0] != "svm_type")
      fail_file(path_, "is not a libsvm model file (it does not start with 'svm_type')");
    do {
      if (tokens[0] == "SV" && tokens.size() == 1) return;
      const auto known = std::find_if(std::begin(kHeaderFields), std::end(kHeaderFields),
                                      [&](const char* f) { return tokens[0] == f; });
      if (known == std::end(kHeaderFields))
        bad_at(line_no_, "unknown header field " + cae::quoted_token(std::string(tokens[0])) +
                             " (or 'SV' before the support vectors)");
      const std::string name(tokens[0]);
      Field& f = fields_[name];
      if (f.line) bad_at(line_no_, "'" + name + "' again (first on line " + std::to_string(f.line) + ")");
      f.line = line_no_;
      f.values.assign(tokens.begin() + 1, tokens.end());
      // The type and kernel first: a model of another kind is named, not picked apart.
      if (name == "svm_type") check_svm_type(f);
      if (name == "kernel_type") check_kernel_type(f);
    } while (next_tokens(tokens));
    fail_file(path_, "ends before its 'SV' line (truncated libsvm model?)");
  }

  void check_svm_type(const Field& f) const {
    const std::string type = f.values.size() == 1 ? f.values[0] : "";
    if (type == "c_svc") return;
    for (const char* other : {"nu_svc", "one_class", "epsilon_svr", "nu_svr"})
      if (type == other)
        bad_at(f.line, "svm_type " + type + " is not supported: only c_svc classifiers (svm-train -s 0)");
    bad_at(f.line, "svm_type is not one libsvm type (c_svc, nu_svc, one_class, epsilon_svr, nu_svr)");
  }

  void check_kernel_type(const Field& f) {
    const std::string kernel = f.values.size() == 1 ? f.values[0] : "";
    if (kernel == "rbf" || kernel == "linear") {
      t_.kernel = kernel == "rbf" ? KernelType::rbf : KernelType::linear;
      return;
    }
    for (const char* other : {"polynomial", "sigmoid", "precomputed"})
      if (kernel == other)
        bad_at(f.line, "kernel_type " + kernel + " is not supported: only rbf (svm-train -t 2) and linear (-t 0)");
    bad_at(f.line, "kernel_type is not one libsvm kernel (linear, polynomial, rbf, sigmoid, precomputed)");
  }

  // `token` is a view that a separator or the string's end follows (next_tokens).
  double number(std::string_view token, int64_t line, const std::string& field) const {
    char* end = nullptr;
    const double v = token.empty() ? 0 : std::strtod(token.data(), &end);
    if (token.empty() || end != token.data() + token.size())
      bad_at(line, field + ": " + cae::quoted_token(std::string(token)) + " is not a number");
    if (!std::isfinite(v))
      bad_at(line, field + ": " + cae::quoted_token(std::string(token)) + " is not finite (NaN or Inf)");
    return v;
  }

  int64_t integer(std::string_view token, int64_t line, const std::string& field, int64_t lo, int64_t hi) const {
    char* end = nullptr;
    errno = 0;
    const long long v = token.empty() ? 0 : std::strtoll(token.data(), &end, 10);
    if (token.empty() || end != token.data() + token.size() || errno != 0 || v < lo || v > hi)
      bad_at(line, field + ": " + cae::quoted_token(std::string(token)) + " is not an integer in " +
                       std::to_string(lo) + ".." + std::to_string(hi));
    return v;
  }

  // A field of exactly `count` values; null when `optional` and absent.
  const Field* field(const char* name, size_t count, bool optional = false) const {
    const auto it = fields_.find(name);
    if (it == fields_.end()) {
      if (optional) return nullptr;
      missing(name);
    }
    const Field& f = it->second;
    if (f.values.size() != count)
      bad_at(f.line, std::string(name) + " lists " + std::to_string(f.values.size()) + " values, this model needs " +
                         std::to_string(count));
    return &f;
  }

  std::vector<double> numbers(const char* name, size_t count, bool optional = false) const {
    std::vector<double> out;
    if (const Field* f = field(name, count, optional))
      for (const std::string& v : f->values) out.push_back(number(v, f->line, name));
    return out;
  }

  void check_header() {
    if (!fields_.count("kernel_type")) missing("kernel_type");
    // gamma as svm-fit --gamma takes it: a finite number > 0.
    if (const Field* g = field("gamma", 1, t_.kernel == KernelType::linear)) {
      t_.gamma = number(g->values[0], g->line, "gamma");
      if (!(t_.gamma > 0)) bad_at(g->line, "gamma " + g->values[0] + " is not > 0");
    }
    for (const char* ignored : {"degree", "coef0"}) numbers(ignored, 1, true);
    const Field* nr_class = field("nr_class", 1);
    t_.k = static_cast<int>(integer(nr_class->values[0], nr_class->line, "nr_class", 2, 65536));
    const Field* total_sv = field("total_sv", 1);
    t_.l = integer(total_sv->values[0], total_sv->line, "total_sv", 1, std::numeric_limits<int32_t>::max());
    const size_t k = static_cast<size_t>(t_.k), pairs = k * (k - 1) / 2;
    t_.rho = numbers("rho", pairs);
    t_.prob_A = numbers("probA", pairs, true);
    t_.prob_B = numbers("probB", pairs, true);
    if (t_.prob_A.empty() != t_.prob_B.empty()) missing(t_.prob_A.empty() ? "probA" : "probB");
    const Field* label = field("label", k);
    std::set<int> seen;
    for (const std::string& v : label->values) {
      t_.label.push_back(static_cast<int>(
          integer(v, label->line, "label", std::numeric_limits<int>::min(), std::numeric_limits<int>::max())));
      if (!seen.insert(t_.label.back()).second) bad_at(label->line, "label " + v + " names two classes");
    }
    const Field* nr_sv = field("nr_sv", k);
    int64_t sum = 0;
    for (const std::string& v : nr_sv->values) {
      t_.n_sv.push_back(static_cast<int>(integer(v, nr_sv->line, "nr_sv", 0, t_.l)));
      sum += t_.n_sv.back();
    }
    if (sum != t_.l)
      bad_at(nr_sv->line, "nr_sv adds up to " + std::to_string(sum) + ", total_sv says " + std::to_string(t_.l));
  }

  // "coef_1 … coef_{k-1} index:value …" per support vector, indices ascending.
  void read_support_vectors() {
    const size_t n_coef = static_cast<size_t>(t_.k) - 1;
    std::vector<std::string_view> tokens;
    int64_t v = 0;
    for (; next_tokens(tokens); ++v) {
      const std::string sv = "support vector " + std::to_string(v + 1);
      if (v == t_.l) bad_at(line_no_, sv + ": more support vectors than total_sv " + std::to_string(t_.l));
      if (tokens.size() < n_coef)
        bad_at(line_no_, sv + " has " + std::to_string(tokens.size()) + " coefficients, " + std::to_string(t_.k) +
                             " classes need " + std::to_string(n_coef));
      for (size_t c = 0; c < n_coef; ++c) t_.coef.push_back(number(tokens[c], line_no_, sv + " coefficient"));
      int previous = 0;
      for (size_t i = n_coef; i < tokens.size(); ++i) {
        const std::string_view token = tokens[i];
        const size_t colon = token.find(':');
        if (colon == std::string_view::npos)
          bad_at(line_no_, sv + ": " + cae::quoted_token(std::string(token)) + " is not index:value");
        const int index = static_cast<int>(
            integer(token.substr(0, colon), line_no_, sv + " index", 1, std::numeric_limits<int>::max()));
        if (index <= previous)
          bad_at(line_no_, sv + ": index " + std::to_string(index) + " after " + std::to_string(previous) +
                               " (indices must ascend)");
        previous = index;
        const double x = number(token.substr(colon + 1), line_no_, sv + " value");
        if (!std::isfinite(static_cast<float>(x)))
          bad_at(line_no_, sv + ": " + cae::quoted_token(std::string(token)) + " is not a finite float32 value");
        if (index > t_.max_index) t_.max_index = index, t_.max_index_line = line_no_;
        t_.index.push_back(index);
        t_.value.push_back(static_cast<float>(x));
      }
      t_.sv_start.push_back(static_cast<int64_t>(t_.index.size()));
    }
    if (v < t_.l)
      fail_file(path_, "total_sv " + std::to_string(t_.l) + " but " + std::to_string(v) +
                           " support vector lines (truncated file?)");
  }

  std::string path_;
  std::ifstream in_;
  std::string line_;
  int64_t line_no_ = 0;
  std::map<std::string, Field> fields_;
  LibsvmModelText t_;
};

}  // namespace

ModelFile import_libsvm_model(const std::string& path, const LibsvmRange* range, int dim) {
  const LibsvmModelText t = ModelTextReader(path).read();
  const int k = t.k;
  const int64_t l = t.l;
  const int D = std::max({dim, t.max_index, range ? range->dim : 0, 1});
  {  // the dense support vectors and the per-feature scaler and mask
    const uint64_t bytes = cae::saturating_product(static_cast<uint64_t>(D), 4 * static_cast<uint64_t>(l) + 17);
    std::string what = std::to_string(l) + " support vectors of " + (D == t.max_index ? "" : "the input's ") +
                       std::to_string(D) + " features (dense float32)";
    if (D == t.max_index)
      what = "line " + std::to_string(t.max_index_line) + ": index " + std::to_string(D) + ": " + what;
    cae::require_memory(path, what, bytes);
  }

  // The toolkit's classes ascending: position a holds libsvm's class order[a].
  std::vector<int> order(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.label[a] < t.label[b]; });
  std::vector<int64_t> start(static_cast<size_t>(k) + 1, 0);  // libsvm's SV block of each class
  for (int i = 0; i < k; ++i) start[i + 1] = start[i] + t.n_sv[i];
  auto libsvm_pair = [k](int64_t i, int64_t j) {  // i < j, libsvm's (and the toolkit's) pair order
    return static_cast<size_t>(i * (2 * k - i - 1) / 2 + (j - i - 1));
  };
  auto coef = [&](int row, int64_t v) { return t.coef[static_cast<size_t>(v) * (k - 1) + row]; };

  ModelFile f;
  Model& m = f.model;
  m.kernel = t.kernel;
  m.gamma = m.kernel == KernelType::rbf ? t.gamma : 0.0;
  m.dim = D;
  m.support_vectors.assign(static_cast<size_t>(l) * D, 0.0f);
  m.dual_coef.assign(static_cast<size_t>(k - 1) * l, 0.0);
  m.rho.assign(t.rho.size(), 0.0);
  std::vector<int64_t> new_start(static_cast<size_t>(k) + 1, 0);
  for (int a = 0; a < k; ++a) {
    m.classes.push_back(a);
    m.n_support.push_back(t.n_sv[order[a]]);
    f.class_names.push_back(std::to_string(t.label[order[a]]));
    new_start[a + 1] = new_start[a] + t.n_sv[order[a]];
    for (int64_t s = 0; s < t.n_sv[order[a]]; ++s) {
      const int64_t v = start[order[a]] + s;
      float* row = m.support_vectors.data() + static_cast<size_t>(new_start[a] + s) * D;
      for (int64_t e = t.sv_start[v]; e < t.sv_start[v + 1]; ++e) row[t.index[e] - 1] = t.value[e];
    }
  }
  const bool probability = !t.prob_A.empty();
  if (probability) f.prob_A.assign(m.rho.size(), 0.0), f.prob_B.assign(m.rho.size(), 0.0);
  for (int a = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b) {
      // libsvm's pair of these classes, and whether its decision votes the other way.
      const int i = std::min(order[a], order[b]), j = std::max(order[a], order[b]);
      const double sign = order[a] < order[b] ? 1.0 : -1.0;
      const size_t q_old = libsvm_pair(i, j), q_new = libsvm_pair(a, b);
      m.rho[q_new] = sign * t.rho[q_old];
      if (probability) {
        f.prob_A[q_new] = t.prob_A[q_old];
        f.prob_B[q_new] = sign * t.prob_B[q_old];  // P(a | f) = 1 − P(b | −f)
      }
      // Class a's coefficients in the pair sit in row b − 1, class b's in row a (both
      // layouts); libsvm's: class i's in row j − 1, class j's in row i.
      for (int64_t s = 0; s < t.n_sv[order[a]]; ++s)
        m.dual_coef[static_cast<size_t>(b - 1) * l + new_start[a] + s] =
            sign * coef(order[a] == i ? j - 1 : i, start[order[a]] + s);
      for (int64_t s = 0; s < t.n_sv[order[b]]; ++s)
        m.dual_coef[static_cast<size_t>(a) * l + new_start[b] + s] =
            sign * coef(order[b] == i ? j - 1 : i, start[order[b]] + s);
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
  // svm-fit refuses --export-libsvm with --approx before any work; this is the last guard.
  if (f.is_approx()) throw cae::UsageError("--export-libsvm: a nystroem model (--approx) is not a libsvm model");
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
