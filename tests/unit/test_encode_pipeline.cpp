// ae::EncodePipeline (kernels/ae/encode_pipeline.h): the overlapped chunk loop writes a
// features file whose every dataset is byte for byte the one the plain sequential loop
// (read a chunk, encode each view, write it) writes, for random images and weights, six views
// (--flip --shifts 2) and sizes that are not a multiple of the chunk; the sink sees each
// (rows, view) once, in order; a failure on either thread is rethrown and stops the run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/dataset.h"
#include "common/hdf5_io.h"
#include "common/provenance.h"
#include "common/view_set.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/encode_pipeline.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/model.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;

const ae::Architecture kArch(3, 8, 8, {4, 2});
const int64_t kTrain = 37, kTest = 11, kChunk = 8;  // 4 chunks + 5 rows; 1 chunk + 3 rows

// A model of random weights and an image dataset of random pixels, in `dir`.
void write_inputs(const TempDir& dir) {
  ae::Checkpoint c;
  c.arch = kArch;
  c.params = ae::init_params(kArch, 5);
  c.optimizer_kind = "adam";
  ae::write_checkpoint(dir.file("model.h5"), "model.h5", c, cae::Provenance{"ae-model", 1, "{}", {}});
  std::mt19937 rng(17);
  cae::Hdf5Writer w(dir.file("data.h5"));
  for (auto [split, n] : {std::pair<const char*, int64_t>{"train", kTrain}, {"test", kTest}}) {
    cae::ImageSplit s;
    s.C = 3, s.H = 8, s.W = 8;
    for (int64_t i = 0; i < n * s.image_bytes(); ++i) s.images.push_back(static_cast<uint8_t>(rng()));
    for (int64_t i = 0; i < n; ++i) s.labels.push_back(static_cast<uint8_t>(rng() % 3));
    cae::write_split(w, split, s);
  }
  cae::write_class_names(w, {"a", "b", "c"});
  cae::write_provenance(w, cae::Provenance{cae::kDatasetFormat, 1, "{}", {}});
  w.close();
}

// The features file of both splits in `views`: through the pipeline (reading up to
// `read_ahead` bytes of pixels ahead), or through the sequential loop the pipeline replaces
// (the reference).
void encode_file(const TempDir& dir, const std::string& out, const cae::ViewSet& views, bool pipelined,
                 int64_t read_ahead = ae::EncodePipeline::kReadAheadBytes) {
  cae::DatasetReader data(dir.file("data.h5"));
  ae::Encoder encoder(dir.file("model.h5"), cae::Device::cpu, 1, 3);
  ae::FeaturesWriter w(dir.file(out), out, kArch);
  const std::vector<cae::ImageView> list = views.views();
  ae::EncodePipeline pipeline(data, encoder, list, kChunk, read_ahead);
  for (const std::string split : {"train", "test"}) {
    const int64_t n = data.count(split);
    w.begin_split(split, n, views);
    if (pipelined) {
      pipeline.run(split, 0, n, [&](int64_t row, int64_t rows, int v, const float* f) {
        w.write_rows(split, row, rows, f, v);
      });
    } else {
      std::vector<uint8_t> pixels(size_t(kChunk * kArch.image_dim()));
      std::vector<float> features(size_t(kChunk * kArch.latent_dim()));
      for (int64_t row = 0; row < n; row += kChunk) {
        const int64_t rows = std::min(kChunk, n - row);
        data.read_images(split, row, rows, pixels.data());
        for (size_t v = 0; v < list.size(); ++v) {
          encoder.encode_view(pixels.data(), rows, list[v], features.data(), split, row);
          w.write_rows(split, row, rows, features.data(), int(v));
        }
      }
    }
    w.write_labels(split, data.read_labels(split));
  }
  w.finish(cae::Provenance{"ae-features", 1, "{}", {}}, {"cpu", 0, 0, data.class_names()});
}

// A features dataset's values (float16, ae-encode's default storage) as floats.
std::vector<float> stored_features(const cae::Hdf5Reader& r, const std::string& name) {
  const cae::Shape s = r.shape(name);
  std::vector<float> x(size_t(s[0] * s[1]));
  r.read_floats(name, 0, s[0], x.data());
  return x;
}

// Reading every chunk ahead at once, three chunks ahead (each pixel slot reused), and the
// least, two.
TEST(EncodePipeline, WritesTheSequentialLoopsFileByteForByte) {
  TempDir dir;
  write_inputs(dir);
  const cae::ViewSet views(true, 2);
  ASSERT_EQ(views.count(), 6);
  encode_file(dir, "sequential.h5", views, false);
  const int64_t chunk_bytes = kChunk * kArch.image_dim();
  for (const int64_t read_ahead : {ae::EncodePipeline::kReadAheadBytes, 3 * chunk_bytes + 1, int64_t{0}}) {
    SCOPED_TRACE("read ahead " + std::to_string(read_ahead) + " bytes");
    encode_file(dir, "pipelined.h5", views, true, read_ahead);
    cae::Hdf5Reader a(dir.file("sequential.h5")), b(dir.file("pipelined.h5"));
    for (const std::string split : {"train", "test"}) {
      std::vector<std::vector<float>> seen;
      for (const cae::ImageView& view : views.views()) {
        const std::string name = "/" + split + "/" + cae::features_dataset(view);
        const std::vector<float> want = stored_features(a, name), got = stored_features(b, name);
        const int64_t n = split == "train" ? kTrain : kTest;
        ASSERT_EQ(want.size(), size_t(n * kArch.latent_dim())) << name;
        ASSERT_EQ(got.size(), want.size()) << name;
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << name;
        // Real codes: finite, not all zero, and each view's its own.
        int nonzero = 0;
        for (float x : got) nonzero += std::isfinite(x) && x != 0.f;
        EXPECT_GT(nonzero, int(got.size() / 4)) << name;
        for (const std::vector<float>& other : seen) EXPECT_NE(other, got) << name;
        seen.push_back(got);
      }
      EXPECT_EQ(a.read<uint8_t>("/" + split + "/labels"), b.read<uint8_t>("/" + split + "/labels"));
    }
  }
}

TEST(EncodePipeline, SinkGetsEveryChunkOfAShareOnceInRowThenViewOrder) {
  TempDir dir;
  write_inputs(dir);
  cae::DatasetReader data(dir.file("data.h5"));
  ae::Encoder encoder(dir.file("model.h5"), cae::Device::cpu, 1, 3);
  const std::vector<cae::ImageView> views = cae::ViewSet(true, 0).views();
  ae::EncodePipeline pipeline(data, encoder, views, kChunk);
  const int64_t dim = kArch.latent_dim();
  // A group rank's share: rows [3, 24) of train, then all of test on the same pipeline.
  for (auto [split, first, count] : {std::tuple<std::string, int64_t, int64_t>{"train", 3, 21}, {"test", 0, kTest}}) {
    std::vector<std::tuple<int64_t, int64_t, int>> calls;
    std::vector<int64_t> progress;
    pipeline.run(
        split, first, count,
        [&](int64_t row, int64_t rows, int v, const float* f) {
          calls.emplace_back(row, rows, v);
          // The rows' features, not another slot's: those of the images encoded directly.
          std::vector<uint8_t> pixels(size_t(rows * kArch.image_dim()));
          data.read_images(split, row, rows, pixels.data());
          ae::Encoder direct(dir.file("model.h5"), cae::Device::cpu, 1, 3);
          std::vector<float> want(size_t(rows * dim));
          direct.encode_view(pixels.data(), rows, views[size_t(v)], want.data(), split, row);
          EXPECT_EQ(std::memcmp(f, want.data(), want.size() * sizeof(float)), 0) << split << " row " << row;
        },
        [&](int64_t done) { progress.push_back(done); });
    std::vector<std::tuple<int64_t, int64_t, int>> want;
    for (int64_t row = first; row < first + count; row += kChunk)
      for (int v = 0; v < 2; ++v) want.emplace_back(row, std::min(kChunk, first + count - row), v);
    EXPECT_EQ(calls, want) << split;
    EXPECT_EQ(progress.back(), count) << split;
  }
}

// A pipeline of one view over the random inputs, for the failure tests.
struct OneViewPipeline {
  TempDir dir;
  std::unique_ptr<cae::DatasetReader> data;
  std::unique_ptr<ae::Encoder> encoder;
  std::unique_ptr<ae::EncodePipeline> pipeline;
  OneViewPipeline() {
    write_inputs(dir);
    data = std::make_unique<cae::DatasetReader>(dir.file("data.h5"));
    encoder = std::make_unique<ae::Encoder>(dir.file("model.h5"), cae::Device::cpu, 1, 3);
    pipeline = std::make_unique<ae::EncodePipeline>(*data, *encoder, cae::ViewSet(false, 0).views(), kChunk);
  }
  // The message of the run's exception; "" when it ran through.
  std::string failure(int64_t count, const ae::EncodePipeline::Sink& sink) {
    try {
      pipeline->run("train", 0, count, sink);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }
};

TEST(EncodePipeline, RethrowsASinkFailureAndRunsNothingAfterIt) {
  OneViewPipeline p;
  int calls = 0;
  EXPECT_EQ(p.failure(kTrain,
                      [&](int64_t, int64_t, int, const float*) {
                        if (++calls == 2) throw std::runtime_error("out.h5: disk full");
                      }),
            "out.h5: disk full");
  EXPECT_EQ(calls, 2);
}

TEST(EncodePipeline, RethrowsAReadFailureNamingTheFile) {
  OneViewPipeline p;
  int calls = 0;
  // Rows past the end of train: the fifth chunk (rows 32..39 of 37) fails to read.
  const std::string what = p.failure(kTrain + 2 * kChunk, [&](int64_t, int64_t, int, const float*) { ++calls; });
  EXPECT_NE(what.find("data.h5"), std::string::npos) << what;
  EXPECT_NE(what.find("past the end"), std::string::npos) << what;
  EXPECT_LE(calls, 4);
}

}  // namespace

// --device auto set up in the background (ae-encode's way): on a host without a GPU the
// answer comes on the setup thread and the CPU backend is built on the caller's, and it
// encodes as the CPU encoder does; where there is a GPU, the GPU tests compare the devices.
TEST(Encoder, AutoInTheBackgroundWithoutAGpuEncodesAsTheCpu) {
  if (cae::gpu_available()) GTEST_SKIP() << "this host has a GPU: --device auto is the GPU here";
  TempDir dir;
  write_inputs(dir);
  cae::DatasetReader data(dir.file("data.h5"));
  std::vector<uint8_t> pixels(size_t(kTrain * kArch.image_dim()));
  data.read_images("train", 0, kTrain, pixels.data());
  ae::Encoder cpu(dir.file("model.h5"), cae::Device::cpu, 1, 3);
  ae::Encoder asked(dir.file("model.h5"), cae::DeviceChoice("auto"), 1, 3, /*gpu_setup_in_background=*/true);
  const size_t n = size_t(kTrain * kArch.latent_dim());
  std::vector<float> want(n), got(n);
  cpu.encode(pixels.data(), kTrain, want.data(), nullptr, "train", 0);
  asked.encode(pixels.data(), kTrain, got.data(), nullptr, "train", 0);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0);
  EXPECT_EQ(asked.describe(), cpu.describe());
}
