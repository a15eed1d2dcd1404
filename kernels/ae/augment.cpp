#include "kernels/ae/augment.h"

#include <algorithm>

namespace ae {

void flip_horizontal(const uint8_t* in, int64_t n, int channels, int height, int width, uint8_t* out) {
  const int64_t rows = n * channels * height;  // every image row of every channel is independent
#pragma omp parallel for schedule(static) if (rows * width >= (int64_t{1} << 20))
  for (int64_t r = 0; r < rows; ++r) std::reverse_copy(in + r * width, in + (r + 1) * width, out + r * width);
}

}  // namespace ae
