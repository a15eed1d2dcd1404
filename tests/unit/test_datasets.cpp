// Unit tests of the dataset readers (issue 16): IDX parsing and its checks, CIFAR-100
// records, the image conversion (area resampling, BT.601 luma) and the decoders' errors.
// Random, never all-zero inputs; expected values from direct definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>

#include <jpeglib.h>

#include <fstream>
#include <iterator>

#include "common/bounded_read.h"
#include "common/cifar100.h"
#include "common/error.h"
#include "common/idx.h"
#include "common/image_decode.h"

namespace {

std::vector<uint8_t> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(1, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(d(rng));
  return v;
}

std::vector<uint8_t> idx_file(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> f = {0, 0, 8, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) f.push_back(uint8_t(d >> s));
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Idx, ParsesImagesAndKeepsTheFirstRows) {
  const auto px = random_bytes(5 * 4 * 3, 1);
  const auto f = idx_file({5, 4, 3}, px);
  cae::IdxArray a = cae::parse_idx("x", f.data(), f.size(), 3);
  EXPECT_EQ(a.dims, (std::vector<uint32_t>{5, 4, 3}));
  EXPECT_EQ(a.data, px);
  cae::IdxArray b = cae::parse_idx("x", f.data(), f.size(), 3, 2);
  EXPECT_EQ(b.dims[0], 2u);
  EXPECT_EQ(b.rows_in_file, 5u);
  EXPECT_EQ(b.data, std::vector<uint8_t>(px.begin(), px.begin() + 24));
}

TEST(Idx, RejectsWrongMagicTruncationTrailingDataAndHugeHeaders) {
  const auto px = random_bytes(12, 2);
  auto f = idx_file({12}, px);
  EXPECT_NE(error_of([&] { cae::parse_idx("lab", f.data(), f.size(), 3); }).find("lab: wrong magic number 0x00000801"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cae::parse_idx("lab", f.data(), f.size() - 1, 1); }).find("lab: is truncated: 19 bytes"),
            std::string::npos);
  f.push_back(7);
  EXPECT_NE(error_of([&] { cae::parse_idx("lab", f.data(), f.size(), 1); }).find("has trailing data"), std::string::npos);
  const auto huge = idx_file({0xFFFFFFFFu, 0xFFFFu, 0xFFFFu}, {});
  EXPECT_NE(error_of([&] { cae::parse_idx("img", huge.data(), huge.size(), 3); }).find("more than 4 GB"),
            std::string::npos);
  const uint8_t two[2] = {0, 0};
  EXPECT_NE(error_of([&] { cae::parse_idx("t", two, 2, 1); }).find("no IDX header"), std::string::npos);
}

TEST(Cifar100, FineAndCoarseLabelsAndRangeChecks) {
  auto data = random_bytes(3 * cae::kCifar100RecordBytes, 3);
  for (int r = 0; r < 3; ++r) data[r * cae::kCifar100RecordBytes] = uint8_t(r + 4), data[r * cae::kCifar100RecordBytes + 1] = uint8_t(30 * r + 7);
  cae::ImageSplit fine, coarse;
  cae::parse_cifar100("t", data.data(), data.size(), false, fine, 0);
  cae::parse_cifar100("t", data.data(), data.size(), true, coarse, 2);
  EXPECT_EQ(fine.labels, (std::vector<uint8_t>{7, 37, 67}));
  EXPECT_EQ(coarse.labels, (std::vector<uint8_t>{4, 5}));
  EXPECT_EQ(0, memcmp(fine.image(1), data.data() + cae::kCifar100RecordBytes + 2, 3072));
  data[2 * cae::kCifar100RecordBytes + 1] = 100;
  EXPECT_NE(error_of([&] { cae::ImageSplit s; cae::parse_cifar100("t", data.data(), data.size(), false, s, 1); })
                .find("t: record 2 has labels"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cae::ImageSplit s; cae::parse_cifar100("t", data.data(), 100, false, s, 0); })
                .find("not a whole number"),
            std::string::npos);
}

// The definition: output pixel = area-weighted mean of the source, by direct integration
// over a fine sub-grid (exact for the rational scales used here).
double area_reference(const std::vector<uint8_t>& src, int h, int w, int H, int W, int y, int x) {
  const int sub = h * w * H * W > 0 ? 60 : 1;  // 60 is divisible by every scale below
  double sum = 0;
  int count = 0;
  for (int sy = 0; sy < sub; ++sy)
    for (int sx = 0; sx < sub; ++sx) {
      const double fy = (y + (sy + 0.5) / sub) * h / H, fx = (x + (sx + 0.5) / sub) * w / W;
      sum += src[size_t(int(fy)) * w + int(fx)];
      ++count;
    }
  return sum / count;
}

TEST(ImageConvert, AreaResamplingMatchesTheDefinition) {
  const int h = 12, w = 10;
  const auto src = random_bytes(size_t(h) * w, 4);
  for (auto [H, W] : {std::pair{6, 5}, std::pair{4, 2}, std::pair{5, 4}, std::pair{24, 20}, std::pair{12, 10}}) {
    std::vector<uint8_t> dst(size_t(H) * W);
    cae::resample_area(src.data(), h, w, dst.data(), H, W);
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        EXPECT_NEAR(dst[size_t(y) * W + x], area_reference(src, h, w, H, W, y, x), 0.5 + 1e-9) << H << "x" << W;
  }
  std::vector<uint8_t> same(size_t(h) * w);
  cae::resample_area(src.data(), h, w, same.data(), h, w);
  EXPECT_EQ(same, src);  // the identity is exact
}

TEST(ImageConvert, ColourConversions) {
  cae::DecodedImage rgb;
  rgb.height = 2, rgb.width = 3, rgb.channels = 3;
  rgb.pixels = random_bytes(18, 5);
  const auto gray = cae::convert_image(rgb, 1, 2, 3);
  for (int p = 0; p < 6; ++p) {
    const double want = 0.299 * rgb.pixels[3 * p] + 0.587 * rgb.pixels[3 * p + 1] + 0.114 * rgb.pixels[3 * p + 2];
    EXPECT_NEAR(gray[p], want, 0.51);
  }
  const auto chw = cae::convert_image(rgb, 3, 2, 3);
  for (int p = 0; p < 6; ++p)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(chw[c * 6 + p], rgb.pixels[3 * p + c]);
  cae::DecodedImage g;
  g.height = 2, g.width = 2, g.channels = 1;
  g.pixels = random_bytes(4, 6);
  const auto g3 = cae::convert_image(g, 3, 2, 2);
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 4; ++p) EXPECT_EQ(g3[c * 4 + p], g.pixels[p]);
  EXPECT_THROW(cae::convert_image(g, 2, 2, 2), std::invalid_argument);
}

TEST(ImageDecode, RejectsNonImagesAndTruncatedHeaders) {
  const auto junk = random_bytes(64, 7);
  EXPECT_NE(error_of([&] { cae::decode_image_memory("j.png", junk.data(), junk.size()); }).find("j.png: is not a PNG or JPEG"),
            std::string::npos);
  const uint8_t png_head[12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
  EXPECT_NE(error_of([&] { cae::decode_image_memory("t.png", png_head, sizeof png_head); }).find("t.png: corrupt PNG"),
            std::string::npos);
  const uint8_t jpeg_head[4] = {0xFF, 0xD8, 0xFF, 0xE0};
  EXPECT_NE(error_of([&] { cae::decode_image_memory("t.jpg", jpeg_head, sizeof jpeg_head); }).find("t.jpg: corrupt JPEG"),
            std::string::npos);
}

// ---- issue 30: every colour model converts or is refused as unsupported; lying sizes --------

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A small JPEG made by libjpeg: `components` samples a pixel in colour space `cs`.
std::vector<uint8_t> encode_jpeg(J_COLOR_SPACE cs, int components, int w, int h, unsigned seed) {
  jpeg_compress_struct c;
  jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = JDIMENSION(w), c.image_height = JDIMENSION(h), c.input_components = components, c.in_color_space = cs;
  jpeg_set_defaults(&c);
  jpeg_start_compress(&c, TRUE);
  const auto px = random_bytes(size_t(w) * h * components, seed);
  for (int y = 0; y < h; ++y) {
    JSAMPROW row = const_cast<uint8_t*>(px.data()) + size_t(y) * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(mem, mem + size);
  free(mem);
  return out;
}

TEST(ImageDecode, CmykAndYcckJpegsConvertAsPillowDoes) {
  // Fixtures: tests/helpers/make_cmyk_jpeg.c; expected RGB: Pillow (tests/helpers/cmyk_expected.py).
  for (const char* name : {"cmyk-adobe", "ycck-adobe", "cmyk-plain"}) {
    SCOPED_TRACE(name);
    const std::string base = std::string("tests/fixtures/jpeg/") + name;
    const auto want = slurp(base + ".rgb");
    ASSERT_EQ(want.size(), 24u * 16 * 3) << "run the unit tests from the repository root";
    const cae::DecodedImage img = cae::decode_image_file(base + ".jpg");
    ASSERT_EQ(img.channels, 3);
    ASSERT_EQ(img.height, 16);
    ASSERT_EQ(img.width, 24);
    int worst = 0;
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(int(img.pixels[i]) - int(want[i])));
    EXPECT_LE(worst, 1);  // the same libjpeg gives 0; another IDCT may round one step apart
  }
}

TEST(ImageDecode, CmykToRgbIsPillowsFormulaOnRandomInks) {
  // Random inks encoded with libjpeg's defaults (CMYK, Adobe's marker), decoded back by
  // libjpeg alone as CMYK; our RGB must be Pillow's cmyk2rgb of those samples, inverted as
  // the marker says.
  const auto jpg = encode_jpeg(JCS_CMYK, 4, 16, 8, 11);
  jpeg_decompress_struct d;
  jpeg_error_mgr e;
  d.err = jpeg_std_error(&e);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpg.data(), jpg.size());
  ASSERT_EQ(jpeg_read_header(&d, TRUE), JPEG_HEADER_OK);
  d.out_color_space = JCS_CMYK;
  jpeg_start_decompress(&d);
  std::vector<uint8_t> cmyk(16 * 8 * 4);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = cmyk.data() + size_t(d.output_scanline) * 16 * 4;
    jpeg_read_scanlines(&d, &row, 1);
  }
  const bool inverted = d.saw_Adobe_marker;
  EXPECT_EQ(d.jpeg_color_space, JCS_CMYK);
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  const cae::DecodedImage img = cae::decode_image_memory("r.jpg", jpg.data(), jpg.size());
  ASSERT_EQ(img.channels, 3);
  for (size_t p = 0; p < 16 * 8; ++p) {
    const int flip = inverted ? 255 : 0;
    const int nk = 255 - (cmyk[4 * p + 3] ^ flip);
    for (int c = 0; c < 3; ++c) {
      const int t = (cmyk[4 * p + c] ^ flip) * nk + 128;
      EXPECT_EQ(img.pixels[3 * p + c], nk - (((t >> 8) + t) >> 8)) << p;
    }
  }
}

TEST(ImageDecode, UnknownColourModelsAndTwelveBitSamplesAreUnsupportedNotCorrupt) {
  // Two components: libjpeg decodes it, but it is no colour model (JCS_UNKNOWN).
  const auto two = encode_jpeg(JCS_UNKNOWN, 2, 8, 8, 12);
  try {
    cae::decode_image_memory("two.jpg", two.data(), two.size());
    FAIL() << "decoded a 2-component JPEG";
  } catch (const cae::UnsupportedInput& e) {
    EXPECT_NE(std::string(e.what()).find("two.jpg: unsupported JPEG colour model (2 components"), std::string::npos)
        << e.what();
  }
  // 12-bit samples: the SOF's precision byte of a valid gray JPEG set to 12.
  auto twelve = encode_jpeg(JCS_GRAYSCALE, 1, 8, 8, 13);
  bool patched = false;
  for (size_t i = 0; i + 4 < twelve.size() && !patched; ++i)
    if (twelve[i] == 0xFF && twelve[i + 1] == 0xC0) twelve[i + 4] = 12, patched = true;
  ASSERT_TRUE(patched);
  try {
    cae::decode_image_memory("t12.jpg", twelve.data(), twelve.size());
    FAIL() << "decoded a 12-bit JPEG";
  } catch (const cae::UnsupportedInput& e) {
    EXPECT_NE(std::string(e.what()).find("t12.jpg: unsupported JPEG"), std::string::npos) << e.what();
  }
  // Damage stays "corrupt": the same gray JPEG cut in its entropy-coded data.
  auto cut = encode_jpeg(JCS_GRAYSCALE, 1, 64, 64, 14);
  cut.resize(cut.size() * 2 / 3);
  try {
    cae::decode_image_memory("cut.jpg", cut.data(), cut.size());
    FAIL() << "decoded a truncated JPEG";
  } catch (const cae::UnsupportedInput& e) {
    FAIL() << "a truncated file called unsupported: " << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jpg: corrupt JPEG"), std::string::npos) << e.what();
  }
}

TEST(BoundedRead, MemoryFollowsTheBytesReadNotTheDeclaredSize) {
  const auto data = random_bytes(100, 15);
  size_t pos = 0, largest_request = 0;
  auto source = [&](uint8_t* out, size_t n) -> size_t {
    largest_request = std::max(largest_request, n);
    const size_t k = std::min(n, data.size() - pos);
    std::memcpy(out, data.data() + pos, k);
    pos += k;
    return k;
  };
  const auto got = cae::read_growing(source, (uint64_t(1) << 32) + 1, uint64_t(1) << 32);
  EXPECT_EQ(got, data);
  EXPECT_LE(largest_request, size_t(1) << 16);  // never a 4 GB buffer for a 100-byte stream
  EXPECT_LE(got.capacity(), size_t(1) << 16);
  // A truthful stream: exactly its bytes, and the limit is respected (limit+1 detects more).
  const auto big = random_bytes(300000, 16);
  pos = 0;
  auto big_source = [&](uint8_t* out, size_t n) -> size_t {
    const size_t k = std::min(n, big.size() - pos);
    std::memcpy(out, big.data() + pos, k);
    pos += k;
    return k;
  };
  EXPECT_EQ(cae::read_growing(big_source, big.size() + 1, big.size()), big);
  pos = 0;
  EXPECT_EQ(cae::read_growing(big_source, 1000, big.size()).size(), 1000u);
  pos = 0;
  const std::vector<uint8_t> head = {1, 2, 3};
  const auto with_head = cae::read_growing(big_source, 10, 0, head);
  ASSERT_EQ(with_head.size(), 10u);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), with_head.begin()));
  EXPECT_TRUE(std::equal(big.begin(), big.begin() + 7, with_head.begin() + 3));
}

TEST(ImageDecode, PngDeclaringMorePixelsThanItsBytesCanHoldIsRefusedBeforeAllocating) {
  // IHDR of 9000 x 9000 RGB and one IDAT of 11 bytes: deflate cannot make 243 MB out of a
  // 57-byte file, so the header is refused before a buffer is sized from it.
  auto crc32 = [](const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
  };
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto chunk = [&](const char* type, std::vector<uint8_t> data) {
    for (int s = 24; s >= 0; s -= 8) png.push_back(uint8_t(data.size() >> s));
    std::vector<uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    png.insert(png.end(), body.begin(), body.end());
    const uint32_t c = crc32(body.data(), body.size());
    for (int s = 24; s >= 0; s -= 8) png.push_back(uint8_t(c >> s));
  };
  chunk("IHDR", {0, 0, 0x23, 0x28, 0, 0, 0x23, 0x28, 8, 2, 0, 0, 0});
  chunk("IDAT", {0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00});
  const std::string err = error_of([&] { cae::decode_image_memory("lie.png", png.data(), png.size()); });
  EXPECT_NE(err.find("lie.png: corrupt PNG: its header declares 9000x9000 pixels"), std::string::npos) << err;
}

}  // namespace
