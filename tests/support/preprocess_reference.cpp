#include "tests/support/preprocess_reference.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace svm {

double gamma_scale(const float* X, int64_t n, int dim) {
  // numpy's X.var(): mean first, then the mean squared deviation, in double; each row summed
  // in column order, the row sums added in row order.
  const int64_t total = n * dim;
  std::vector<double> row_sum(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    for (int f = 0; f < dim; ++f) s += X[r * dim + f];
    row_sum[r] = s;
  }
  double sum = 0;
  for (double s : row_sum) sum += s;
  const double mean = sum / static_cast<double>(total);
  for (int64_t r = 0; r < n; ++r) {
    double s = 0;
    for (int f = 0; f < dim; ++f) {
      const double d = static_cast<double>(X[r * dim + f]) - mean;
      s = std::fma(d, d, s);  // as preprocess.cpp spells it
    }
    row_sum[r] = s;
  }
  double sq = 0;
  for (double s : row_sum) sq += s;
  const double var = sq / static_cast<double>(total);
  return var != 0 ? 1.0 / (static_cast<double>(dim) * var) : 1.0;
}

std::vector<uint8_t> constant_feature_mask(const float* X, int64_t n, int dim, std::vector<float>* dropped_values) {
  std::vector<uint8_t> keep(dim, 0);
  for (int64_t r = 1; r < n; ++r)
    for (int f = 0; f < dim; ++f)
      if (X[r * dim + f] != X[f]) keep[f] = 1;
  if (dropped_values) {
    dropped_values->clear();
    for (int f = 0; f < dim; ++f)
      if (!keep[f]) dropped_values->push_back(n > 0 ? X[f] : 0.0f);
  }
  return keep;
}

}  // namespace svm
