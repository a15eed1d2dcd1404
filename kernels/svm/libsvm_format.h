// libsvm's own text formats (docs/FORMATS.md, "libsvm text"): its sparse data files, its
// model files and svm-scale's range files, read into the toolkit's types and written from
// them, so that data and models move both ways between the toolkit and libsvm's svm-train,
// svm-predict and svm-scale.
//
//   data   common/libsvm_data.h reads them (below both model layers, so that the one
//          features reader of kernels/ae reads them too); write_libsvm_data writes them.
//   model  c_svc with an rbf or linear kernel, converted to and from svm::ModelFile
//          (classes ascending, pair order): read by the toolkit's own parser, which checks
//          every header field and line before sizing anything (libsvm's svm_load_model
//          trusts its input: a damaged model is a read out of bounds there); written by
//          libsvm's svm_save_model.
//   range  svm-scale -s's file: x, "lower upper", then "index min max" per feature; it
//          becomes the model's scaler, x' = lower + (upper − lower)(x − min)/(max − min).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/libsvm_data.h"
#include "kernels/svm/model_file.h"

namespace svm {

// svm-scale's range file, as the per-feature affine map x' = (x − offset) / scale that
// svm::Scaler applies; features the file does not list map to 0, as svm-scale does.
struct LibsvmRange {
  std::vector<double> offset, scale;  // [dim]
  int dim = 0;                        // the largest index listed
};
LibsvmRange read_libsvm_range(const std::string& path);

// A model trained by libsvm's svm-train (c_svc, rbf or linear), as the toolkit's model:
// classes ascending (class c is the c-th smallest label, named as libsvm wrote it), support
// vectors grouped by class, dual coefficients and rho in the toolkit's pair order (a pair
// whose libsvm order is reversed has its signs and its probability B flipped), dense over
// max(dim, the largest index of any support vector, the range's dim) features. `range`:
// svm-scale's map of the raw features (null: the model reads the features as given).
// Throws "<path>: line L: <problem>" for a malformed, inconsistent or non-finite field
// (gamma > 0 as svm-fit --gamma takes it; NaN/Inf coefficients, rho or probA/probB; labels
// distinct; nr_sv adding up to total_sv; k − 1 coefficients a line), names an svm_type or
// kernel_type it does not read, and refuses (common/memory_limit.h: require_memory) dense
// support vectors larger than half of what the process may allocate, before allocating.
ModelFile import_libsvm_model(const std::string& path, const LibsvmRange* range = nullptr, int dim = 0);

// The model in libsvm's text format, written by libsvm's own svm_save_model to
// out.temp_path() (the caller commits): support vectors over the scaled input's D features
// (a dropped feature carries its training value), labels the class names where every one
// is an integer, else the class indices. svm-predict then predicts the rows that
// write_libsvm_data writes from scaled features as the toolkit does.
void save_libsvm_model(const cae::AtomicOutput& out, const ModelFile& f);

// The label libsvm sees for class c: its name when every class name is an integer, else c.
int libsvm_label(const std::vector<std::string>& class_names, int c);

}  // namespace svm
