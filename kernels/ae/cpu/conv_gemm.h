// What the one-image convolution layers (Conv3x3, UpConv3x3) compute the same way around
// their different rearrangements: the GEMM call and the bias gradient. Inline, so each
// layer compiles them as if written in place.
#pragma once
#include <cblas.h>

#include <cstdint>

namespace ae::cpu {

// C = A·B + beta·C, row-major, alpha 1; sizes as the layers compute them (int64_t).
inline void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t N, int64_t K, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

// gb[k] += Σ_p dy[k, p] for K output planes of `plane` floats each: one image's share of
// the bias gradient, summed in float in plane order.
inline void add_bias_grad(const float* dy, int K, int64_t plane, float* gb) {
  for (int k = 0; k < K; ++k) {
    const float* d = dy + k * plane;
    float s = 0.0f;
    for (int64_t p = 0; p < plane; ++p) s += d[p];
    gb[k] += s;
  }
}

}  // namespace ae::cpu
