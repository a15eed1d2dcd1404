// Image augmentations applied before encoding (ae-encode --flip / --shifts): the pixels of
// each view of a cae::ViewSet, made on the host so that every backend encodes them alike.
#pragma once
#include <cstdint>

#include "common/view_set.h"

namespace ae {

// Mirrors n images [n, C, H, W] (uint8, CHW per image) left to right: out[.., y, x] =
// in[.., y, W-1-x]. `out` must not overlap `in`.
void flip_horizontal(const uint8_t* in, int64_t n, int channels, int height, int width, uint8_t* out);

// The pixels of `view` of n images [n, C, H, W]: the image shifted by the view's offset
// (dy, dx) (cae::shift_offset), pixel (y, x) taken from (y − dy, x − dx) with the border that
// the shift vacates filled by copying the nearest edge pixel (the coordinates clamped to the
// image; docs/DECISIONS.md), then mirrored left to right when view.mirrored. The identity
// view copies. `out` must not overlap `in`.
void make_view(const uint8_t* in, int64_t n, int channels, int height, int width, const cae::ImageView& view,
               uint8_t* out);

}  // namespace ae
