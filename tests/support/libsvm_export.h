// The toolkit's own writer of libsvm's text model and of svm-train's weight options: the
// tests load what it writes with libsvm (svm_load_model) and compare predictions, a check
// independent of the writer the tools use (svm::save_libsvm_model, through libsvm's
// svm_save_model). No tool calls these.
#pragma once
#include <string>

#include "common/atomic_output.h"
#include "kernels/svm/model_file.h"

namespace svm {

// The weights as libsvm's svm-train takes them ("-w0 2 -w3 0.5", labels as in the model;
// "" when every weight is 1): what reproduces this model's fit with libsvm's own tools.
std::string libsvm_weight_options(const ModelFile& f);

// libsvm text model (svm_type c_svc or one_class) with feature indices 1..D of the scaled
// input; libsvm's svm-predict gives the model's predictions on data written by
// write_libsvm_data. Writes out.temp_path(); the caller commits.
void write_libsvm_model(const cae::AtomicOutput& out, const ModelFile& f);

}  // namespace svm
