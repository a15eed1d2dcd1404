// libsvm's sparse data files (docs/FORMATS.md, "libsvm text"), read dense: model-agnostic
// text, so it sits below both model layers — kernels/ae's features reader (ae::read_features,
// the one reader of every features format) and kernels/svm's model import both see it.
//
//   "label index:value index:value ...", one row per line, indices 1-based and ascending,
//   absent indices 0. Read dense: [n, D] float32, D the largest index (or more, for a model
//   that needs more). Labels are integers as written; class c is the c-th entry of
//   class_names, each the label as written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cae {

// True when `path` does not start with HDF5's signature: the tools read such a features
// file as libsvm text. Throws "<path>: cannot open" when it cannot be read, and refuses a
// FIFO, socket or device by name.
bool is_libsvm_text(const std::string& path);

// A label as libsvm reads it (strtod) that is an integer: true, with its canonical spelling
// in `out` ("+1.0" and "1" are both "1"), so the same class is one name whichever way a file
// wrote it.
bool canonical_libsvm_label(const char* text, std::string& out);

// A token of a libsvm file as an error message quotes it: in single quotes, control bytes
// escaped (escape_controls), at most its first 32 bytes and then "... (N bytes)", so that a
// megabyte token gives a one-line message.
std::string quoted_token(const std::string& token);

struct LibsvmData {
  std::vector<float> X;                  // [n, dim] row-major
  std::vector<int32_t> labels;           // [n] class indices into class_names
  std::vector<std::string> class_names;  // each class's label as written ("-1", "3")
  int64_t n = 0;
  int dim = 0;
};

// Reads a libsvm data file. `classes`: the class names a model knows (its class_names), so
// that class c means the same here as there; labels that are not among them are appended
// in ascending order (classes the model can never predict). Empty: the file's own labels,
// ascending. `min_dim`: the width the rows must have at least (a model's feature count).
// Throws "<path>: line L: <problem>" on malformed text, a non-integer or non-finite value,
// or a duplicate or descending index, and "<path>: line L: index I: ... need B bytes ..."
// (common/memory_limit.h: require_memory) when the dense matrix would take more than half
// of what this process may allocate, before allocating it.
LibsvmData read_libsvm_data(const std::string& path, const std::vector<std::string>& classes = {}, int min_dim = 0);

}  // namespace cae
