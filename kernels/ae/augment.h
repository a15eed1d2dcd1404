// Image augmentations applied before encoding (ae-encode --flip).
#pragma once
#include <cstdint>

namespace ae {

// Mirrors n images [n, C, H, W] (uint8, CHW per image) left to right: out[.., y, x] =
// in[.., y, W-1-x]. `out` must not overlap `in`.
void flip_horizontal(const uint8_t* in, int64_t n, int channels, int height, int width, uint8_t* out);

}  // namespace ae
