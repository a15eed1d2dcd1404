#include "common/image_decode.h"

#include <jpeglib.h>
// After jpeglib.h (it needs its types): the message codes, to tell a memory refusal apart.
#include <jerror.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/error.h"
#include "common/whole_file.h"

namespace cae {
namespace {

// A compressed image file larger than this is not a picture this toolkit can use.
constexpr int64_t kMaxImageFileBytes = int64_t(1) << 28;

void check_dimensions(const std::string& name, uint64_t w, uint64_t h) {
  if (w == 0 || h == 0) fail_file(name, "image has no pixels (" + std::to_string(w) + "x" + std::to_string(h) + ")");
  if (w > (1u << 16) || h > (1u << 16) || w * h * 3 > kMaxDecodedImageBytes)
    fail_file(name, "image of " + std::to_string(w) + "x" + std::to_string(h) + " pixels is too large (2^28 bytes at most)");
}

// ---- PNG -----------------------------------------------------------------------------------
struct PngSource {
  const uint8_t* data;
  size_t size, pos;
};

struct PngError {
  std::string message;
};

void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "file is truncated");
  memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

// libpng reports errors through longjmp; the message is kept for the one error line.
void png_on_error(png_structp png, png_const_charp msg) {
  static_cast<PngError*>(png_get_error_ptr(png))->message = msg ? msg : "unknown error";
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

DecodedImage decode_png(const std::string& name, const uint8_t* data, size_t size) {
  PngError err;
  PngSource src{data, size, 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_on_error, png_on_warning);
  if (!png) throw std::bad_alloc();
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    throw std::bad_alloc();
  }
  // Everything that must survive the longjmp lives outside this frame's automatic
  // variables that change after setjmp (rows is allocated before, filled after).
  DecodedImage img;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail_file(name, "corrupt PNG: " + err.message);
  }
  png_set_read_fn(png, &src, png_read_mem);
  png_set_user_limits(png, 1u << 16, 1u << 16);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  try {
    check_dimensions(name, w, h);  // before any pixel buffer exists
  } catch (...) {
    png_destroy_read_struct(&png, &info, nullptr);
    throw;
  }
  // The header's size is a claim: deflate expands at most 1032:1, so pixel data (a filter
  // byte and the packed samples of every row) beyond that cannot be in this file. Checked
  // before any buffer is sized from it; a 100-byte file can then never cost more than a few MB.
  const uint64_t raw = uint64_t(h) * (uint64_t(png_get_rowbytes(png, info)) + 1);
  if (raw > 1032 * uint64_t(size) + 4096) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail_file(name, "corrupt PNG: its header declares " + std::to_string(w) + "x" + std::to_string(h) + " pixels (" +
                        std::to_string(raw) + " bytes of pixel data), more than a " + std::to_string(size) +
                        "-byte file can hold");
  }
  const int color = png_get_color_type(png, info);
  // To 8-bit gray or RGB, whatever the file stores.
  png_set_strip_16(png);
  png_set_packing(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int channels = png_get_channels(png, info);
  if (channels != 1 && channels != 3) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail_unsupported(name, "PNG layout: " + std::to_string(channels) + " channels after conversion");
  }
  img.height = int(h), img.width = int(w), img.channels = channels;
  img.pixels.resize(size_t(h) * w * channels);
  rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) rows[y] = img.pixels.data() + size_t(y) * w * channels;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return img;
}

// ---- JPEG ----------------------------------------------------------------------------------
struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}
// libjpeg-turbo warns on recoverable damage (e.g. "premature end of data segment") and then
// fills the rest with gray; a damaged file is an error here, never a silently gray picture.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_on_error(cinfo);
}

// The working memory libjpeg may claim for a file of `size` bytes (its whole-image buffers:
// progressive and multi-scan files keep every coefficient, 2 bytes a sample). A real photo
// needs far less than 512 bytes per byte of file; a few bytes declaring a huge picture do not
// get it (libjpeg stops with "backing store not supported" before allocating).
long jpeg_memory_limit(size_t size) { return long(std::max<uint64_t>(uint64_t(64) << 20, 512 * uint64_t(size))); }

// CMYK → RGB as Pillow converts it (Convert.c cmyk2rgb): R = (255-K) - (C·(255-K))/255,
// rounded as Pillow's MULDIV255. Adobe's files (the APP14 marker: Photoshop and most print
// software) store every channel inverted (0 = full ink); libjpeg converts YCCK to that same
// inverted CMYK, so `inverted` follows the marker for both.
void cmyk_to_rgb(const uint8_t* in, uint8_t* out, int width, bool inverted) {
  const int flip = inverted ? 255 : 0;
  for (int x = 0; x < width; ++x, in += 4, out += 3) {
    const int nk = 255 - (in[3] ^ flip);
    for (int c = 0; c < 3; ++c) {
      const int t = (in[c] ^ flip) * nk + 128;
      out[c] = static_cast<uint8_t>(std::clamp(nk - (((t >> 8) + t) >> 8), 0, 255));
    }
  }
}

DecodedImage decode_jpeg(const std::string& name, const uint8_t* data, size_t size) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  DecodedImage img;
  std::vector<uint8_t> cmyk_row;
  if (setjmp(err.jump)) {
    const bool over_memory = err.mgr.msg_code == JERR_NO_BACKING_STORE || err.mgr.msg_code == JERR_OUT_OF_MEMORY;
    jpeg_destroy_decompress(&cinfo);
    if (over_memory)
      fail_file(name, "corrupt JPEG: its header declares a picture that needs more than " +
                          std::to_string(jpeg_memory_limit(size) >> 20) + " MB of working memory, too much for a " +
                          std::to_string(size) + "-byte file");
    // Valid JPEG processes this build of libjpeg does not decode: not damage.
    switch (err.mgr.msg_code) {
      case JERR_BAD_PRECISION:
      case JERR_SOF_UNSUPPORTED:
      case JERR_ARITH_NOTIMPL:
      case JERR_CONVERSION_NOTIMPL:
      case JERR_NOT_COMPILED: fail_unsupported(name, std::string("JPEG: ") + err.message);
      default: fail_file(name, std::string("corrupt JPEG: ") + err.message);
    }
  }
  jpeg_create_decompress(&cinfo);
  cinfo.mem->max_memory_to_use = jpeg_memory_limit(size);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  // Gray stays gray; YCbCr and RGB become RGB in the library; CMYK and YCCK are asked for
  // as CMYK (libjpeg converts YCCK → CMYK, not either to RGB) and converted below.
  std::string unsupported;
  bool cmyk = false;
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_YCbCr:
    case JCS_RGB: cinfo.out_color_space = JCS_RGB; break;
    case JCS_CMYK:
    case JCS_YCCK: cinfo.out_color_space = JCS_CMYK, cmyk = true; break;
    default: unsupported = "JPEG colour model (" + std::to_string(cinfo.num_components) + " components, not gray, " +
                           "YCbCr, RGB, CMYK or YCCK)";
  }
  if (cinfo.data_precision != 8)
    unsupported = "JPEG of " + std::to_string(cinfo.data_precision) + "-bit samples (8-bit only)";
  if (!unsupported.empty()) {
    jpeg_destroy_decompress(&cinfo);
    fail_unsupported(name, unsupported);
  }
  if (cinfo.image_width == 0 || cinfo.image_height == 0 || cinfo.image_width > (1u << 16) ||
      cinfo.image_height > (1u << 16) || uint64_t(cinfo.image_width) * cinfo.image_height * 3 > kMaxDecodedImageBytes) {
    const std::string dims = std::to_string(cinfo.image_width) + "x" + std::to_string(cinfo.image_height);
    jpeg_destroy_decompress(&cinfo);
    fail_file(name, "image of " + dims + " pixels is empty or too large (2^28 bytes at most)");
  }
  jpeg_start_decompress(&cinfo);
  const bool inverted = cinfo.saw_Adobe_marker;
  img.height = int(cinfo.output_height), img.width = int(cinfo.output_width), img.channels = cmyk ? 3 : cinfo.output_components;
  const size_t row_bytes = size_t(img.width) * img.channels;
  if (cmyk) cmyk_row.resize(size_t(img.width) * 4);
  // The pixel buffer grows with the rows decoded (doubling): the header's size is a claim,
  // and a short file ends at its first missing row ("premature end of data" is an error).
  while (cinfo.output_scanline < cinfo.output_height) {
    const size_t y = cinfo.output_scanline;
    if (img.pixels.size() < (y + 1) * row_bytes)
      img.pixels.resize(std::min(size_t(img.height), std::max<size_t>(2 * y, 16)) * row_bytes);
    JSAMPROW row = cmyk ? cmyk_row.data() : img.pixels.data() + y * row_bytes;
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (cmyk) cmyk_to_rgb(cmyk_row.data(), img.pixels.data() + y * row_bytes, img.width, inverted);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  if (img.channels != 1 && img.channels != 3) fail_unsupported(name, "JPEG colour layout");
  return img;
}

}  // namespace

DecodedImage decode_image_memory(const std::string& name, const uint8_t* data, size_t size) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && memcmp(data, kPng, 8) == 0) return decode_png(name, data, size);
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return decode_jpeg(name, data, size);
  fail_file(name, "is not a PNG or JPEG file");
}

DecodedImage decode_image_file(const std::string& path) {
  const std::vector<uint8_t> buf = read_regular_file(path, [](int64_t bytes) -> std::string {
    return bytes > kMaxImageFileBytes ? "is larger than 256 MB: not an image this toolkit reads" : "";
  });
  return decode_image_memory(path, buf.data(), buf.size());
}

void resample_area(const uint8_t* src, int h, int w, uint8_t* dst, int H, int W) {
  if (h == H && w == W) {
    memcpy(dst, src, size_t(h) * w);
    return;
  }
  // Output pixel x covers source interval [x·w/W, (x+1)·w/W); each source pixel's weight is
  // its overlap with that interval. Weights per axis, computed once.
  struct Tap {
    int first;
    std::vector<double> weight;
  };
  auto taps = [](int n_in, int n_out) {
    std::vector<Tap> t(static_cast<size_t>(n_out));
    const double scale = double(n_in) / n_out;
    for (int o = 0; o < n_out; ++o) {
      const double a = o * scale, b = (o + 1) * scale;
      int i0 = int(a), i1 = std::min(n_in, int(std::ceil(b)));
      if (i1 <= i0) i1 = i0 + 1;
      t[o].first = i0;
      for (int i = i0; i < i1; ++i) t[o].weight.push_back((std::min(b, i + 1.0) - std::max(a, double(i))) / scale);
    }
    return t;
  };
  const std::vector<Tap> ty = taps(h, H), tx = taps(w, W);
  std::vector<double> rows(size_t(H) * w, 0.0);  // vertical pass first: [H, w]
  for (int y = 0; y < H; ++y)
    for (size_t k = 0; k < ty[y].weight.size(); ++k) {
      const uint8_t* s = src + size_t(ty[y].first + k) * w;
      const double wt = ty[y].weight[k];
      for (int x = 0; x < w; ++x) rows[size_t(y) * w + x] += wt * s[x];
    }
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      double v = 0;
      for (size_t k = 0; k < tx[x].weight.size(); ++k) v += tx[x].weight[k] * rows[size_t(y) * w + tx[x].first + k];
      dst[size_t(y) * W + x] = static_cast<uint8_t>(std::min(255.0, std::max(0.0, std::floor(v + 0.5))));
    }
}

std::vector<uint8_t> convert_image(const DecodedImage& img, int C, int H, int W) {
  if ((C != 1 && C != 3) || H < 1 || W < 1 || uint64_t(C) * H * W > kMaxDecodedImageBytes)
    throw std::invalid_argument("convert_image: target shape must be 1 or 3 channels of at least 1x1 pixels");
  const int h = img.height, w = img.width, c = img.channels;
  const size_t plane = size_t(h) * w;
  // Colour first (at the source size), then each plane resampled.
  std::vector<uint8_t> planes(size_t(C) * plane);
  for (size_t p = 0; p < plane; ++p) {
    const uint8_t* px = img.pixels.data() + p * c;
    if (C == c) {
      for (int ch = 0; ch < C; ++ch) planes[ch * plane + p] = px[ch];
    } else if (C == 1) {  // RGB → gray
      planes[p] = luma601(px[0], px[1], px[2]);
    } else {  // gray → RGB
      planes[p] = planes[plane + p] = planes[2 * plane + p] = px[0];
    }
  }
  std::vector<uint8_t> out(size_t(C) * H * W);
  for (int ch = 0; ch < C; ++ch) resample_area(planes.data() + ch * plane, h, w, out.data() + size_t(ch) * H * W, H, W);
  return out;
}

}  // namespace cae
