// libFuzzer target: the PNG/JPEG decoder (libpng, libjpeg-turbo: every colour model and bit
// depth, CMYK/YCCK, dimension lies) and the conversion every decoded image takes, on
// arbitrary bytes. A refusal is std::runtime_error (UnsupportedInput included).
#include "common/image_decode.h"

#include <stdexcept>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const cae::DecodedImage img = cae::decode_image_memory("fuzz", data, size);
    cae::convert_image(img, 3, 8, 8);
    cae::convert_image(img, 1, 5, 7);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
