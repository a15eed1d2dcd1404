#include "kernels/svm/cpu/kernel.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "kernels/svm/svm.h"

// OpenBLAS's own thread count, declared weak so the library still links against another BLAS.
extern "C" void openblas_set_num_threads(int num_threads) __attribute__((weak));

namespace svm {

void set_cpu_threads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
  if (openblas_set_num_threads) openblas_set_num_threads(threads);
}

}  // namespace svm

namespace svm::cpu {

void row_squared_norms(const float* X, int64_t n, int dim, double* out) {
#pragma omp parallel for schedule(static) if (n * dim >= kMinParallelWork)
  for (int64_t i = 0; i < n; ++i) {
    const float* x = X + i * dim;
    double s = 0;
    for (int f = 0; f < dim; ++f) s += static_cast<double>(x[f]) * x[f];
    out[i] = s;
  }
}

namespace {

// Turns dot products into kernel values in place for columns [j0, j1) of one row.
inline void dots_to_kernel(const KernelSpec& k, double a_norm, const double* b_norms, float* row, int64_t j0,
                           int64_t j1) {
  if (k.type == KernelType::linear) return;
  const double g = k.gamma;
  for (int64_t j = j0; j < j1; ++j) {
    double d2 = a_norm + b_norms[j] - 2.0 * static_cast<double>(row[j]);
    row[j] = static_cast<float>(std::exp(-g * std::max(d2, 0.0)));
  }
}

}  // namespace

void kernel_block(const KernelSpec& k, const float* A, int64_t na, const double* a_norms, const float* B,
                  int64_t nb, const double* b_norms, int dim, float* out, int64_t ldo) {
  if (na == 0 || nb == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(na), static_cast<blasint>(nb), dim, 1.0f,
              A, dim, B, dim, 0.0f, out, static_cast<blasint>(ldo));
  if (k.type == KernelType::linear) return;
#pragma omp parallel for schedule(static) if (na * nb * 16 >= kMinParallelWork)
  for (int64_t i = 0; i < na; ++i) dots_to_kernel(k, a_norms[i], b_norms, out + i * ldo, 0, nb);
}

void kernel_block_symmetric(const KernelSpec& k, const float* A, int64_t na, const double* a_norms, int dim,
                            float* out, int64_t ldo) {
  if (na == 0) return;
  // Row-major upper triangle: row i holds columns j >= i.
  cblas_ssyrk(CblasRowMajor, CblasUpper, CblasNoTrans, static_cast<blasint>(na), dim, 1.0f, A, dim, 0.0f, out,
              static_cast<blasint>(ldo));
#pragma omp parallel for schedule(dynamic, 32) if (na * na * 8 >= kMinParallelWork)
  for (int64_t i = 0; i < na; ++i) {
    float* row = out + i * ldo;
    dots_to_kernel(k, a_norms[i], a_norms, row, i, na);
    if (k.type == KernelType::rbf) row[i] = 1.0f;  // exp(0), whatever rounding the dot product had
  }
  // Mirror the upper triangle into the lower one, tile by tile so both sides stay in cache.
  constexpr int64_t kTile = 64;
  const int64_t tiles = (na + kTile - 1) / kTile;
#pragma omp parallel for schedule(dynamic, 1) if (na * na >= kMinParallelWork)
  for (int64_t ti = 0; ti < tiles; ++ti) {
    const int64_t i0 = ti * kTile, i1 = std::min(na, i0 + kTile);
    for (int64_t j0 = 0; j0 <= i0; j0 += kTile) {
      const int64_t j1 = std::min(na, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < std::min(j1, i); ++j) out[i * ldo + j] = out[j * ldo + i];
    }
  }
}

}  // namespace svm::cpu
