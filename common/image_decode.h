// PNG and JPEG files → pixels, and the one conversion every image takes on its way into a
// dataset or a model (cifar-convert's image folders and `classify` call the same function,
// so a file classified by `classify` gets exactly the pixels the folder converter stores).
//
// Decoding is Debian's libpng and libjpeg-turbo; the format is told by the file's magic
// bytes, not its name. Conversion (docs/DECISIONS.md):
//   colour: RGB → gray by BT.601 luma with libjpeg's/PIL's integer weights
//           (19595 R + 38470 G + 7471 B + 32768) >> 16; gray → RGB by copying the plane;
//           alpha is dropped (not composited), palettes and 16-bit samples expanded to 8 bits;
//           CMYK and YCCK JPEGs → RGB as Pillow converts them (inverted where the file has
//           Adobe's marker). What neither library converts (12-bit JPEG, unknown colour
//           models) throws UnsupportedInput, not a "corrupt" error.
//   memory: a header's dimensions are a claim: a PNG's must fit deflate's 1032:1 ratio to
//           the file's size, a JPEG's pixel rows are stored as they decode and libjpeg's
//           working memory is capped by the file size (docs/RELIABILITY.md, class 2).
//   size:   exact area resampling (each output pixel is the area-weighted mean of the source
//           pixels it covers; separable, in double, rounded half up). An image already of the
//           target size is copied unchanged, so a PNG of a dataset image reproduces it exactly.
//           The aspect ratio is not kept: H×W is stretched to the target.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cae {

struct DecodedImage {
  int height = 0, width = 0;
  int channels = 0;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // [height, width, channels] (interleaved, as decoders give it)
};

// Larger images are refused before any pixel buffer is allocated (2^28 bytes decoded).
constexpr uint64_t kMaxDecodedImageBytes = uint64_t(1) << 28;

// Decodes a PNG or JPEG file. Throws std::runtime_error("<path>: ...") for a file that is
// missing, not PNG/JPEG, truncated or corrupt, or too large; UnsupportedInput (common/error.h)
// for a valid file in a form not read.
DecodedImage decode_image_file(const std::string& path);
// The same for bytes in memory; `name` is used in errors.
DecodedImage decode_image_memory(const std::string& name, const uint8_t* data, size_t size);

// The image as [C, H, W] uint8 (CHW, the dataset layout) for C = 1 or 3: colour conversion,
// then area resampling (see above). Throws std::invalid_argument on a bad target shape.
std::vector<uint8_t> convert_image(const DecodedImage& img, int C, int H, int W);

// Only the resampling, on one plane [h, w] → [H, W] (exposed for tests).
void resample_area(const uint8_t* src, int h, int w, uint8_t* dst, int H, int W);
// BT.601 luma as above.
inline uint8_t luma601(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((19595u * r + 38470u * g + 7471u * b + 32768u) >> 16);
}

}  // namespace cae
