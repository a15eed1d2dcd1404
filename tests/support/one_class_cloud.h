// The one-class SVM tests' data (tests/unit/test_one_class.cpp, tests/gpu/test_one_class_gpu.cu).
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace svm_test {

// n rows [n, dim] of one Gaussian cloud whose every tenth row spreads three times wider, so
// that nu cuts through a tail: some multipliers at the bound 1, some free, most 0.
inline std::vector<float> one_class_cloud(int64_t n, int dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> X(static_cast<size_t>(n) * dim);
  for (int64_t i = 0; i < n; ++i) {
    const float spread = i % 10 == 7 ? 3.f : 1.f;
    for (int f = 0; f < dim; ++f) X[static_cast<size_t>(i) * dim + f] = 0.2f + spread * normal(rng);
  }
  return X;
}

}  // namespace svm_test
