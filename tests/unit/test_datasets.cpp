// Unit tests of the dataset readers (issue 16): IDX parsing and its checks, CIFAR-100
// records, the image conversion (area resampling, BT.601 luma) and the decoders' errors.
// Random, never all-zero inputs; expected values from direct definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>

#include "common/cifar100.h"
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

}  // namespace
