// View sets (common/view_set.h): the parser and the views' names, the pixels of each view
// (kernels/ae/augment.h) against a plain two-step reference (shift with the edge copied, then
// mirror), the encoder's codes of a view, and a features file's views written and read back
// into one buffer (kernels/ae/features_file.h, features_reader.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "common/provenance.h"
#include "common/view_set.h"
#include "kernels/ae/augment.h"
#include "kernels/ae/backend.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/features_reader.h"
#include "kernels/ae/model.h"
#include "tests/support/temp_dir.h"

namespace {

using cae::ImageView;
using cae::ViewSet;

using cae_test::TempDir;

std::vector<uint8_t> random_pixels(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> p(count);
  for (uint8_t& v : p) v = static_cast<uint8_t>(rng() & 255);
  return p;
}

std::string parse_error(const std::string& spec) {
  try {
    ViewSet::parse(spec);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ViewSet, ParsesSpecsIntoOrderedViewsAndTheirDatasets) {
  const ViewSet none = ViewSet::parse("none");
  EXPECT_EQ(none.count(), 1);
  EXPECT_EQ(none.spec(), "none");
  EXPECT_EQ(none.views(), (std::vector<ImageView>{{0, false}}));

  const ViewSet flip = ViewSet::parse("flip");
  EXPECT_TRUE(flip.flip());
  EXPECT_EQ(flip.shifts(), 0);
  EXPECT_EQ(flip.count(), 2);
  EXPECT_EQ(flip.spec(), "flip");
  EXPECT_EQ(flip.views(), (std::vector<ImageView>{{0, false}, {0, true}}));
  EXPECT_EQ(flip.rows_description(), "images + mirrors");  // svm-fit's log of a flip fit

  const ViewSet shifts = ViewSet::parse("shift:3");
  EXPECT_FALSE(shifts.flip());
  EXPECT_EQ(shifts.count(), 4);
  EXPECT_EQ(shifts.spec(), "shift:3");
  EXPECT_EQ(shifts.views(), (std::vector<ImageView>{{0, false}, {1, false}, {2, false}, {3, false}}));

  // Either order of the terms; the spec is canonical, (1 + K) × 2 views.
  for (const std::string spec : {"flip,shift:2", "shift:2,flip"}) {
    const ViewSet both = ViewSet::parse(spec);
    EXPECT_EQ(both.count(), 6) << spec;
    EXPECT_EQ(both.spec(), "flip,shift:2") << spec;
    const std::vector<ImageView> v = both.views();
    EXPECT_EQ(v, (std::vector<ImageView>{{0, false}, {0, true}, {1, false}, {1, true}, {2, false}, {2, true}}));
    std::vector<std::string> datasets;
    for (const ImageView& view : v) datasets.push_back(cae::features_dataset(view));
    EXPECT_EQ(datasets, (std::vector<std::string>{"features", "features_flip", "features_shift1", "features_shift1_flip",
                                                  "features_shift2", "features_shift2_flip"}));
  }
  EXPECT_EQ(ViewSet(true, 8).count(), 18);
  EXPECT_EQ(ViewSet(true, 8).spec(), "flip,shift:8");
  EXPECT_EQ(ViewSet(true).spec(), "flip");  // ae-encode --flip alone
  EXPECT_EQ(cae::view_label({0, true}), "mirrored");
  EXPECT_EQ(cae::view_label({3, true}), "mirrored shifted (+2,+0)");
}

TEST(ViewSet, RefusesBadSpecsSayingWhy) {
  EXPECT_NE(parse_error("shift:0").find("'shift:0': K must be an integer 1..8"), std::string::npos);
  EXPECT_NE(parse_error("shift:-1").find("'shift:-1': K must be an integer 1..8"), std::string::npos);
  EXPECT_NE(parse_error("shift:9").find("K must be an integer 1..8"), std::string::npos);
  EXPECT_NE(parse_error("shift:2x").find("K must be an integer"), std::string::npos);
  EXPECT_NE(parse_error("shift:").find("K must be an integer"), std::string::npos);
  EXPECT_NE(parse_error("rotate").find("unknown view 'rotate'"), std::string::npos);
  EXPECT_NE(parse_error("flip,none").find("unknown view 'none'"), std::string::npos);
  EXPECT_NE(parse_error("flip,flip").find("'flip' given twice"), std::string::npos);
  EXPECT_NE(parse_error("shift:1,shift:2").find("shift given twice"), std::string::npos);
  EXPECT_NE(parse_error("").find("has an empty view"), std::string::npos);
  EXPECT_NE(parse_error("flip,").find("has an empty view"), std::string::npos);
  EXPECT_NE(parse_error(",flip").find("has an empty view"), std::string::npos);
  EXPECT_THROW(ViewSet(false, 9), std::invalid_argument);
  EXPECT_THROW(ViewSet(false, -1), std::invalid_argument);
  EXPECT_THROW(cae::shift_offset(0), std::invalid_argument);
  EXPECT_THROW(cae::shift_offset(9), std::invalid_argument);
}

TEST(ViewSet, ShiftOffsetsAreTheDocumentedList) {
  const std::vector<std::pair<int, int>> documented = {{0, 2},  {0, -2},  {2, 0},  {-2, 0},
                                                       {2, 2}, {-2, -2}, {2, -2}, {-2, 2}};
  for (int k = 1; k <= cae::kMaxShifts; ++k) {
    const cae::ShiftOffset o = cae::shift_offset(k);
    EXPECT_EQ(std::make_pair(o.dy, o.dx), documented[size_t(k - 1)]) << k;
  }
}

// The reference: shift by (dy, dx) with out-of-image sources replaced by the nearest edge
// pixel, written as the two cases separately, then mirrored by flip_horizontal.
std::vector<uint8_t> reference_view(const std::vector<uint8_t>& in, int n, int C, int H, int W, const ImageView& view) {
  const cae::ShiftOffset o = view.shift ? cae::shift_offset(view.shift) : cae::ShiftOffset{};
  std::vector<uint8_t> shifted(in.size());
  for (int i = 0; i < n * C; ++i)
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        int sy = y - o.dy, sx = x - o.dx;
        if (sy < 0) sy = 0;
        if (sy >= H) sy = H - 1;
        if (sx < 0) sx = 0;
        if (sx >= W) sx = W - 1;
        shifted[size_t((i * H + y) * W + x)] = in[size_t((i * H + sy) * W + sx)];
      }
  if (!view.mirrored) return shifted;
  std::vector<uint8_t> mirrored(in.size());
  ae::flip_horizontal(shifted.data(), n, C, H, W, mirrored.data());
  return mirrored;
}

TEST(MakeView, EveryViewEqualsTheShiftThenMirrorReference) {
  const int n = 3, C = 3, H = 7, W = 9;  // not square: rows and columns are not confused
  const std::vector<uint8_t> in = random_pixels(size_t(n * C * H * W), 5);
  std::vector<uint8_t> out(in.size());
  std::vector<std::vector<uint8_t>> seen;
  for (const ImageView& view : ViewSet(true, cae::kMaxShifts).views()) {
    ae::make_view(in.data(), n, C, H, W, view, out.data());
    EXPECT_EQ(out, reference_view(in, n, C, H, W, view)) << cae::features_dataset(view);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), out), 0) << cae::features_dataset(view) << " repeats a view";
    seen.push_back(out);
  }
  EXPECT_EQ(seen.front(), in);  // the identity view copies
}

TEST(MakeView, ShiftRightByTwoCopiesTheLeftEdgeIntoTheVacatedColumns) {
  const int H = 4, W = 6;
  const std::vector<uint8_t> in = random_pixels(size_t(H * W), 8);
  std::vector<uint8_t> out(in.size());
  ae::make_view(in.data(), 1, 1, H, W, {1, false}, out.data());  // shift 1: (dy, dx) = (0, +2)
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < 2; ++x) EXPECT_EQ(out[size_t(y * W + x)], in[size_t(y * W)]) << y << "," << x;
    for (int x = 2; x < W; ++x) EXPECT_EQ(out[size_t(y * W + x)], in[size_t(y * W + x - 2)]) << y << "," << x;
  }
  ae::make_view(in.data(), 1, 1, H, W, {4, false}, out.data());  // shift 4: (−2, 0), up: bottom rows copy the last
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) EXPECT_EQ(out[size_t(y * W + x)], in[size_t(std::min(y + 2, H - 1) * W + x)]);
}

TEST(EncoderViews, CodesOfAViewAreTheBackendsOfItsPixels) {
  TempDir dir;
  const ae::Architecture arch(3, 8, 8, {4, 2});
  const std::vector<float> params = ae::init_params(arch, 3);
  const std::string path = dir.file("model.h5");
  ae::Checkpoint c;
  c.arch = arch;
  c.params = params;
  c.optimizer_kind = "adam";
  ae::write_checkpoint(path, path, c, cae::Provenance{"ae-model", 1, "{}", {}});
  const int n = 4;
  const std::vector<uint8_t> images = random_pixels(size_t(n * arch.image_dim()), 9);
  auto backend = ae::make_backend(cae::Device::cpu, arch, ae::OptimizerConfig{}, ae::Precision::fp32, 1);
  backend->set_params(params);
  ae::Encoder encoder(path, cae::Device::cpu, 1, 3);
  const size_t dim = size_t(arch.latent_dim());
  std::vector<float> plain(n * dim);
  encoder.encode_view(images.data(), n, {}, plain.data(), "test", 0);
  for (const ImageView& view : ViewSet(true, 2).views()) {
    std::vector<uint8_t> pixels(images.size());
    ae::make_view(images.data(), n, 3, 8, 8, view, pixels.data());
    std::vector<float> want(n * dim), codes(n * dim);
    backend->encode(pixels.data(), n, 3, want.data());
    encoder.encode_view(images.data(), n, view, codes.data(), "test", 0);
    EXPECT_EQ(codes, want) << cae::features_dataset(view);
    if (view.shift || view.mirrored) {
      EXPECT_NE(codes, plain) << cae::features_dataset(view);
    }
  }
}

namespace {

// An ae-features file of `views` with random features per view (view v's rows in values[v]).
struct ViewsFile {
  std::string path;
  int64_t n = 0;
  int dim = 0;
  std::vector<std::vector<float>> values;
  std::vector<uint8_t> labels;
};

ViewsFile write_views_file(const TempDir& dir, const ViewSet& views) {
  ViewsFile f;
  f.path = dir.file("views.h5");
  const ae::Architecture arch(3, 8, 8, {4, 2});
  f.n = 50;
  f.dim = static_cast<int>(arch.latent_dim());
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int v = 0; v < views.count(); ++v) {
    f.values.emplace_back(size_t(f.n * f.dim));
    for (float& x : f.values.back()) x = normal(rng);
    cae::round_to_half(f.values.back().data(), f.values.back().size());  // as the float16 file holds them
  }
  for (int64_t i = 0; i < f.n; ++i) f.labels.push_back(static_cast<uint8_t>(rng() % 3));
  ae::FeaturesWriter w(f.path, f.path, arch);
  w.begin_split("train", f.n, views);
  for (int v = views.count() - 1; v >= 0; --v) {  // any order, in two parts
    w.write_rows("train", 20, f.n - 20, f.values[size_t(v)].data() + 20 * f.dim, v);
    w.write_rows("train", 0, 20, f.values[size_t(v)].data(), v);
  }
  w.write_labels("train", f.labels);
  w.finish(cae::Provenance{"ae-features", 1, "{}", {}}, {"cpu", 1.0, 1.0, {"ant", "bee", "cat"}});
  return f;
}

// The index of `view` in the file's view set.
size_t index_in(const ViewSet& file_views, const ImageView& view) {
  const std::vector<ImageView> all = file_views.views();
  return size_t(std::find(all.begin(), all.end(), view) - all.begin());
}

}  // namespace

TEST(FeaturesViews, ReadViewsGivesEachViewsBlockInOrderWithTheLabelsRepeated) {
  TempDir dir;
  const ViewSet written(true, 2);
  const ViewsFile f = write_views_file(dir, written);
  const cae::Hdf5Reader h5(f.path);
  EXPECT_EQ(h5.attr_string("/", "views"), "flip,shift:2");
  EXPECT_EQ(h5.attr_int("/", "flip"), 1);
  const ae::FeaturesReader reader(f.path);
  const int64_t rows = 30;
  for (const std::string spec : {"none", "flip", "shift:1", "shift:2", "flip,shift:1", "flip,shift:2"}) {
    const ViewSet asked = ViewSet::parse(spec);
    EXPECT_FALSE(reader.missing_view("train", asked)) << spec;
    const ae::FeatureSplit s = reader.read_views("train", rows, asked);
    ASSERT_EQ(s.n, rows * asked.count()) << spec;
    ASSERT_EQ(s.X.size(), size_t(s.n * f.dim)) << spec;
    const std::vector<ImageView> views = asked.views();
    for (size_t j = 0; j < views.size(); ++j) {
      const std::vector<float>& want = f.values[index_in(written, views[j])];
      EXPECT_TRUE(std::equal(s.X.begin() + int64_t(j) * rows * f.dim, s.X.begin() + int64_t(j + 1) * rows * f.dim,
                             want.begin()))
          << spec << " view " << j;
      for (int64_t i = 0; i < rows; ++i) EXPECT_EQ(s.labels[size_t(int64_t(j) * rows + i)], f.labels[size_t(i)]);
    }
  }
  // Through read_features, as svm-fit asks for them.
  const ae::FeatureRows training = ae::read_training_rows(f.path, 0, ViewSet(true, 1));
  EXPECT_EQ(training.n, f.n);
  EXPECT_EQ(training.split.n, 4 * f.n);
  EXPECT_TRUE(std::equal(training.split.X.begin() + 2 * f.n * f.dim, training.split.X.begin() + 3 * f.n * f.dim,
                         f.values[index_in(written, {1, false})].begin()));
  // Kept as float16 (a single GPU fit): the same blocks, as halves.
  ae::FeatureRows halves = ae::read_training_rows(f.path, 0, ViewSet(true, 1), /*keep_float16=*/true);
  EXPECT_TRUE(halves.split.X.empty());
  ASSERT_EQ(halves.split.X16.size(), training.split.X.size());
  EXPECT_EQ(halves.split.labels, training.split.labels);
  halves.split.widen();
  EXPECT_TRUE(std::equal(halves.split.X.begin(), halves.split.X.end(), training.split.X.begin()));
}

TEST(FeaturesViews, AViewTheFileLacksIsRefusedNamingTheDatasetAndTheEncode) {
  TempDir dir;
  const ViewsFile f = write_views_file(dir, ViewSet(false, 1));
  const ae::FeaturesReader reader(f.path);
  EXPECT_EQ(cae::features_dataset(*reader.missing_view("train", ViewSet(false, 2))), "features_shift2");
  EXPECT_EQ(cae::features_dataset(*reader.missing_view("train", ViewSet(true, 1))), "features_flip");
  const auto message = [&](const ViewSet& views) {
    try {
      ae::read_training_rows(f.path, 0, views);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message(ViewSet(false, 3)), f.path + ": /train/features_shift2 is missing: --augment shift:3 needs the "
                                                 "features of the shifted images (run ae-encode --shifts 3)");
  EXPECT_EQ(message(ViewSet(true, 1)), f.path + ": /train/features_flip is missing: --augment flip,shift:1 needs the "
                                                "features of the mirrored images (run ae-encode --flip)");
  EXPECT_THROW(reader.read_views("train", 10, ViewSet(false, 2)), std::runtime_error);
  // A libsvm text file has no views.
  const std::string text = dir.file("rows.libsvm");
  { FILE* out = fopen(text.c_str(), "w"); fputs("0 1:0.5\n1 1:1.5\n", out); fclose(out); }
  EXPECT_THROW(ae::read_training_rows(text, 0, ViewSet(false, 1)), cae::UsageError);
}
