// The steps svm::prepare_training_rows fuses that no tool runs on their own any more, each
// from its definition, one row after another: the tests check the fused passes against
// them, and use them to make expected values.
#pragma once
#include <cstdint>
#include <vector>

namespace svm {

// 1 / (dim · Var) over all n·dim entries (1 when Var is 0), as sklearn's gamma='scale':
// numpy's X.var() in double, the mean first, row sums added in row order.
double gamma_scale(const float* X, int64_t n, int dim);

// keep[f] = 0 when column f has one value over all n rows; that value goes to *dropped_values
// (in the order of the dropped features).
std::vector<uint8_t> constant_feature_mask(const float* X, int64_t n, int dim, std::vector<float>* dropped_values);

}  // namespace svm
