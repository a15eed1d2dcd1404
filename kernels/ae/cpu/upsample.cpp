// Nearest-neighbour upsampling ×2 (PyTorch's nn.Upsample(scale_factor=2)).
#include "kernels/ae/cpu/parallel.h"
#include "kernels/ae/cpu/layers.h"

namespace ae::cpu {

void upsample2_forward(const float* x, float* y, int N, int C, int H, int W) {
  const int64_t planes = int64_t(N) * C, in_plane = int64_t(H) * W;
  const int Wo = 2 * W;
#pragma omp parallel for schedule(static) if (worth_parallel(planes * in_plane * 4))
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * in_plane;
    float* yp = y + p * in_plane * 4;
    for (int h = 0; h < H; ++h) {
      float* row0 = yp + int64_t(2 * h) * Wo;
      float* row1 = row0 + Wo;
      for (int w = 0; w < W; ++w) row0[2 * w] = row0[2 * w + 1] = xp[h * W + w];
      for (int w = 0; w < Wo; ++w) row1[w] = row0[w];
    }
  }
}

void upsample2_backward(const float* dy, float* dx, int N, int C, int H, int W) {
  const int64_t planes = int64_t(N) * C, in_plane = int64_t(H) * W;
  const int Wo = 2 * W;
#pragma omp parallel for schedule(static) if (worth_parallel(planes * in_plane * 4))
  for (int64_t p = 0; p < planes; ++p) {
    const float* dyp = dy + p * in_plane * 4;
    float* dxp = dx + p * in_plane;
    for (int h = 0; h < H; ++h) {
      const float* row0 = dyp + int64_t(2 * h) * Wo;
      const float* row1 = row0 + Wo;
      // Summed in the order PyTorch's backward visits them (row-major over the output).
      for (int w = 0; w < W; ++w) dxp[h * W + w] = ((row0[2 * w] + row0[2 * w + 1]) + row1[2 * w]) + row1[2 * w + 1];
    }
  }
}

}  // namespace ae::cpu
