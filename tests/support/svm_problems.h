// Small generated classification problems for the SVM tests: Gaussian clouds per class.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace svm_test {

// Classes as Gaussian clouds with overlap, so some vectors are bounded and some free.
struct Problem {
  std::vector<float> X;
  std::vector<int32_t> y;
  int64_t n = 0;
  int dim = 0;
};

inline Problem make_problem(int n, int dim, int classes, unsigned seed, double spread = 1.2) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> centres(static_cast<size_t>(classes) * dim);
  for (double& c : centres) c = normal(rng);
  Problem p;
  p.n = n;
  p.dim = dim;
  p.X.resize(static_cast<size_t>(n) * dim);
  p.y.resize(n);
  for (int i = 0; i < n; ++i) {
    // The first `classes` samples run through the classes in order, so libsvm (which orders
    // classes by first appearance) and we (ascending) agree on the class order.
    int c = i < classes ? i : static_cast<int>(rng() % classes);
    p.y[i] = c;
    for (int f = 0; f < dim; ++f) p.X[static_cast<size_t>(i) * dim + f] = static_cast<float>(centres[c * dim + f] + spread * normal(rng));
  }
  return p;
}

}  // namespace svm_test
