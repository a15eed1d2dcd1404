#include "common/libsvm_data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <new>

#include "common/error.h"
#include "common/memory_limit.h"

namespace cae {

namespace {

struct SparseEntry {
  int64_t row;
  int index;  // 0-based
  float value;
};

}  // namespace

std::string quoted_token(const std::string& token) {
  constexpr size_t kShown = 32;
  if (token.size() <= kShown + 16) return "'" + escape_controls(token) + "'";
  return "'" + escape_controls(token.substr(0, kShown)) + "'... (" + std::to_string(token.size()) + " bytes)";
}

bool canonical_libsvm_label(const char* text, std::string& out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !std::isfinite(v) || v != std::floor(v) || std::fabs(v) > 2e9)
    return false;
  out = std::to_string(static_cast<int64_t>(v));
  return true;
}

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
  int64_t max_index_line = 0;
  std::string line;
  int64_t line_no = 0;
  // 16 bytes an entry, 4 or more of text: a file near what the process may allocate fails
  // while its entries grow, named with its line.
  try {
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
      if (!canonical_libsvm_label(line.substr(at, end - at).c_str(), label))
        bad("label " + quoted_token(line.substr(at, end - at)) + " is not an integer");
      const int64_t row = static_cast<int64_t>(row_label.size());
      row_label.push_back(label);
      int previous = 0;
      while (end != std::string::npos) {
        at = line.find_first_not_of(" \t", end);
        if (at == std::string::npos) break;
        end = line.find_first_of(" \t", at);
        const std::string token = line.substr(at, end - at);
        const size_t colon = token.find(':');
        if (colon == std::string::npos) bad(quoted_token(token) + " is not index:value");
        char* stop = nullptr;
        errno = 0;
        const long index = std::strtol(token.c_str(), &stop, 10);
        if (stop != token.c_str() + colon || errno != 0 || index < 1 || index > std::numeric_limits<int>::max() / 2)
          bad(quoted_token(token) + " has no index in 1.." + std::to_string(std::numeric_limits<int>::max() / 2));
        if (index <= previous) bad("index " + std::to_string(index) + " after " + std::to_string(previous) +
                                   " (indices must ascend)");
        previous = static_cast<int>(index);
        const char* value_text = token.c_str() + colon + 1;
        const double value = std::strtod(value_text, &stop);
        if (stop == value_text || *stop != '\0') bad(quoted_token(token) + " has no number after ':'");
        if (!std::isfinite(static_cast<float>(value))) bad(quoted_token(token) + " is not a finite float32 value");
        if (previous > max_index) max_index = previous, max_index_line = line_no;
        if (value != 0) entries.push_back({row, previous - 1, static_cast<float>(value)});
      }
    }
  } catch (const std::bad_alloc&) {
    fail_file(path, "line " + std::to_string(line_no) + ": its " + std::to_string(entries.size()) +
                        " non-zero values so far need " + std::to_string(2 * entries.size() * sizeof(SparseEntry)) +
                        " bytes to grow, more than " + memory_headroom().limit + " allows");
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

  const uint64_t dense_bytes =
      saturating_product(saturating_product(static_cast<uint64_t>(d.n), static_cast<uint64_t>(d.dim)), sizeof(float));
  // The message names what set the width: the line with the largest index, or the model.
  std::string what = std::to_string(d.n) + " rows of " + (d.dim == max_index ? "" : "the model's ") +
                     std::to_string(d.dim) + " features (dense float32)";
  if (d.dim == max_index)
    what = "line " + std::to_string(max_index_line) + ": index " + std::to_string(max_index) + ": " + what;
  require_memory(path, what, dense_bytes);
  d.X.assign(static_cast<size_t>(d.n) * static_cast<size_t>(d.dim), 0.0f);
  for (const SparseEntry& e : entries) d.X[static_cast<size_t>(e.row) * d.dim + e.index] = e.value;
  return d;
}

}  // namespace cae
