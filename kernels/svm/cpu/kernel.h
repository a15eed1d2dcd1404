// Kernel matrices for the CPU SVM, computed block-wise with BLAS.
//
// Stock libsvm evaluates every kernel value with its own scalar dot product; on dense
// 8,192-d data that is the whole cost of training. Here a block K(A, B) is one
// cblas_sgemm (A·Bᵀ) followed by an elementwise pass:
//   rbf:    K = exp(-gamma * max(0, |a|² + |b|² - 2 a·b))   (norms in double, exp in double)
//   linear: K = a·b
// Values are stored as float, as libsvm's own kernel cache does.
#pragma once
#include <cstdint>

#include "kernels/svm/svm.h"

namespace svm::cpu {

// Loops with less work than this stay on one thread: on a loaded 2-core machine a parallel
// region costs more than it saves unless it has real work (and results never depend on it).
constexpr int64_t kMinParallelWork = int64_t{1} << 18;

struct KernelSpec {
  KernelType type = KernelType::rbf;
  double gamma = 0.0;
};

// out[i] = |X[i,:]|² in double, for n rows of dim floats.
void row_squared_norms(const float* X, int64_t n, int dim, double* out);

// out[i*ldo + j] = K(A[i], B[j]) for i < na, j < nb. A: [na, dim], B: [nb, dim], row-major.
void kernel_block(const KernelSpec& k, const float* A, int64_t na, const double* a_norms, const float* B,
                  int64_t nb, const double* b_norms, int dim, float* out, int64_t ldo);

// The symmetric block K(A, A), both triangles filled, through ssyrk (half the flops).
// The rbf diagonal is exactly 1.
void kernel_block_symmetric(const KernelSpec& k, const float* A, int64_t na, const double* a_norms, int dim,
                            float* out, int64_t ldo);

}  // namespace svm::cpu
