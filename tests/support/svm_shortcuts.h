// One-call forms of what the tools do in steps, for tests that want only the end result:
// the tools resolve gamma from a spec parsed once and a gamma_scale taken once for many
// specs, and vote on decision values they also use for other outputs.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/model_file.h"
#include "kernels/svm/preprocess.h"
#include "tests/support/preprocess_reference.h"

namespace svm {

// The spec's gamma on these rows (the scaled training matrix, all features).
inline double resolve_gamma(const std::string& spec, const float* X, int64_t n, int dim) {
  const GammaSpec g = parse_gamma_spec(spec);
  return resolve_gamma(g, g.kind == GammaSpec::Kind::scale ? gamma_scale(X, n, dim) : 0.0, dim);
}

}  // namespace svm

namespace svm_test {

// What svm::read_model_file says of the file: "" when it reads it.
inline std::string model_file_refusal(const std::string& path) {
  try {
    svm::read_model_file(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Class labels (+1 / −1 for a one-class model) of n unscaled rows X (scratch).
inline std::vector<int32_t> predict(const svm::Classifier& clf, float* X, int64_t n,
                                    cae::Device device = cae::Device::cpu) {
  return clf.vote(clf.decision_values(X, n, device), n);
}

}  // namespace svm_test
