// A KernelRows (kernels/svm/cpu/smo.h) over the whole kernel matrix of a small problem,
// computed once: the SMO solvers' tests run them on it, apart from the production kernel
// cache, and the GPU tests check a GPU solution's optimality under the CPU's values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"
#include "tests/support/svm_reference.h"

namespace svm_test {

class DenseKernelRows : public svm::cpu::KernelRows {
 public:
  // The kernel between every two of the n rows of X [n, dim], from its definition
  // (kernel_reference, in double).
  static DenseKernelRows by_definition(const svm::cpu::KernelSpec& kernel, const float* X, int n, int dim) {
    std::vector<float> m(static_cast<size_t>(n) * n);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        m[static_cast<size_t>(a) * n + b] = static_cast<float>(
            svm::cpu::kernel_reference(kernel, X + static_cast<int64_t>(a) * dim, X + static_cast<int64_t>(b) * dim, dim));
    return DenseKernelRows(std::move(m), n);
  }
  // The same, as the CPU solvers compute it (kernel_block_symmetric: through the BLAS).
  static DenseKernelRows by_cpu_blocks(const svm::cpu::KernelSpec& kernel, const float* X, int n, int dim) {
    std::vector<double> norms(static_cast<size_t>(n));
    svm::cpu::row_squared_norms(X, n, dim, norms.data());
    std::vector<float> m(static_cast<size_t>(n) * n);
    svm::cpu::kernel_block_symmetric(kernel, X, n, norms.data(), dim, m.data(), n);
    return DenseKernelRows(std::move(m), n);
  }

  // A matrix [n, n] given whole (row-major).
  static DenseKernelRows from_matrix(std::vector<float> m, int n) { return DenseKernelRows(std::move(m), n); }

  const float* row(int t) override { return m_.data() + static_cast<size_t>(t) * n_; }
  double diag(int t) const override { return m_[static_cast<size_t>(t) * n_ + t]; }

 private:
  DenseKernelRows(std::vector<float> m, int n) : n_(n), m_(std::move(m)) {}

  int n_;
  std::vector<float> m_;
};

}  // namespace svm_test
