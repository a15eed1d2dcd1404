#include "kernels/ae/augment.h"

#include <algorithm>
#include <vector>

namespace ae {

void flip_horizontal(const uint8_t* in, int64_t n, int channels, int height, int width, uint8_t* out) {
  const int64_t rows = n * channels * height;  // every image row of every channel is independent
#pragma omp parallel for schedule(static) if (rows * width >= (int64_t{1} << 20))
  for (int64_t r = 0; r < rows; ++r) std::reverse_copy(in + r * width, in + (r + 1) * width, out + r * width);
}

void make_view(const uint8_t* in, int64_t n, int channels, int height, int width, const cae::ImageView& view,
               uint8_t* out) {
  if (view.shift == 0 && view.mirrored) return flip_horizontal(in, n, channels, height, width, out);
  const cae::ShiftOffset offset = view.shift ? cae::shift_offset(view.shift) : cae::ShiftOffset{};
  // Where each output column and row reads from: the mirror picks column W-1-x of the shifted
  // image, whose column x' is the input's x' − dx, clamped (edge copy).
  std::vector<int> source_column(static_cast<size_t>(width));
  for (int x = 0; x < width; ++x)
    source_column[size_t(x)] = std::clamp((view.mirrored ? width - 1 - x : x) - offset.dx, 0, width - 1);
  const int64_t rows = n * channels * height;
#pragma omp parallel for schedule(static) if (rows * width >= (int64_t{1} << 20))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t plane = r / height, y = r % height;
    const uint8_t* src = in + (plane * height + std::clamp<int64_t>(y - offset.dy, 0, height - 1)) * width;
    uint8_t* dst = out + r * width;
    for (int x = 0; x < width; ++x) dst[x] = src[source_column[size_t(x)]];
  }
}

}  // namespace ae
