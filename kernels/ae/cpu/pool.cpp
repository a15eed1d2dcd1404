// 2×2 max pooling, stride 2, fused with the ReLU before it; the argmax is kept for the
// backward pass.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ae/cpu/parallel.h"
#include "kernels/ae/cpu/layers.h"

namespace ae::cpu {

void maxpool2_relu_forward(const float* x, float* y, int32_t* argmax, int N, int C, int H, int W) {
  const int Ho = H / 2, Wo = W / 2;
  const int64_t planes = int64_t(N) * C, in_plane = int64_t(H) * W, out_plane = int64_t(Ho) * Wo;
#pragma omp parallel for schedule(static) if (worth_parallel(planes * in_plane))
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * out_plane;
    int32_t* ap = argmax + p * out_plane;
    for (int h = 0; h < Ho; ++h)
      for (int w = 0; w < Wo; ++w) {
        // As PyTorch: start from -inf at the window's first element; a larger value or a
        // NaN takes over, scanning the window in row-major order.
        int32_t best = 2 * h * W + 2 * w;
        float best_v = -std::numeric_limits<float>::infinity();
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            const int32_t idx = (2 * h + i) * W + 2 * w + j;
            const float v = xp[idx];
            if (v > best_v || std::isnan(v)) best = idx, best_v = v;
          }
        yp[h * Wo + w] = std::max(best_v, 0.0f);
        ap[h * Wo + w] = best;
      }
  }
}

void maxpool2_relu_backward(const float* dy, const int32_t* argmax, const float* y, float* dx, int N, int C, int H,
                            int W) {
  const int64_t planes = int64_t(N) * C, in_plane = int64_t(H) * W, out_plane = in_plane / 4;
#pragma omp parallel for schedule(static) if (worth_parallel(planes * in_plane))
  for (int64_t p = 0; p < planes; ++p) {
    float* dxp = dx + p * in_plane;
    const float* dyp = dy + p * out_plane;
    const float* yp = y + p * out_plane;
    const int32_t* ap = argmax + p * out_plane;
    for (int64_t i = 0; i < in_plane; ++i) dxp[i] = 0.0f;
    // Windows do not overlap, so each input element receives at most one gradient.
    for (int64_t o = 0; o < out_plane; ++o)
      if (yp[o] > 0.0f) dxp[ap[o]] = dyp[o];
  }
}

}  // namespace ae::cpu
