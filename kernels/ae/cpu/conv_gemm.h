// What the one-image convolution layers (Conv3x3, UpConv3x3) compute the same way around
// their different rearrangements: the GEMM call, the bias gradient and the shifted row
// copy of their im2col forms. Inline, so each layer compiles them as if written in place.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

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

// dst[n] = src[n + shift] where 0 <= n + shift < W, else 0, for n in [0, W): one row of a
// 3×3 tap's im2col plane. src null: the tap falls outside the image, a row of zeros.
inline void shifted_row(const float* src, int W, int shift, float* dst) {
  if (!src) {
    std::fill(dst, dst + W, 0.0f);
    return;
  }
  const int w0 = std::max(0, -shift), w1 = std::min(W, W - shift);
  std::fill(dst, dst + w0, 0.0f);
  std::memcpy(dst + w0, src + w0 + shift, sizeof(float) * static_cast<size_t>(w1 - w0));
  std::fill(dst + w1, dst + W, 0.0f);
}

}  // namespace ae::cpu
