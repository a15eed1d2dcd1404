// ae-encode's GPU path (kernels/ae/encode_pipeline.h, Encoder's background GPU setup): an
// Encoder whose CUDA context and weights are set up on a thread of its own while its caller
// reads gives the synchronous Encoder's codes bit for bit, and the pipeline's features of
// random images over several chunks (the last one partial, two views) are those of
// encode_view on the whole range, bit for bit, and within the fp32 tolerance of the CPU's;
// the float16 codes made on the GPU are the host's rounding of its float codes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/dataset.h"
#include "common/half.h"
#include "common/hdf5_io.h"
#include "common/provenance.h"
#include "common/view_set.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/encode_pipeline.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/model.h"
#include "tests/gpu/gpu_test_util.h"

using namespace gpu_test;

namespace {

// A seed model whose every weight and bias is `scale` times init_params(7)'s, written to `path`:
// the encoder's codes grow ~scale² (both layers' ReLU outputs scale with their weights).
void write_scaled_model(const std::string& path, float scale) {
  ae::Checkpoint c;
  c.arch = ae::Architecture::seed();
  c.params = ae::init_params(c.arch, 7);
  for (float& p : c.params) p *= scale;
  c.optimizer_kind = "adam";
  ae::write_checkpoint(path, path, c, cae::Provenance{"ae-model", 1, "{}", {}});
}

// An image-dataset file of n synthetic 3×32×32 training images (`seed`'s) and a one-image test
// split, as ae-encode reads.
void write_synthetic_dataset(const std::string& path, int64_t n, uint64_t seed) {
  cae::Hdf5Writer w(path);
  cae::ImageSplit s;
  s.C = 3, s.H = 32, s.W = 32;
  const std::vector<uint8_t> pixels = synthetic_images(int(n), seed);
  s.images.assign(pixels.begin(), pixels.end());
  for (int64_t i = 0; i < n; ++i) s.labels.push_back(uint8_t(i % 10));
  cae::write_split(w, "train", s);
  s.images.resize(size_t(s.image_bytes()));
  s.labels.resize(1);
  cae::write_split(w, "test", s);
  cae::write_class_names(w, cae::cifar10_class_names());
  cae::write_provenance(w, cae::Provenance{cae::kDatasetFormat, 1, "{}", {}});
  w.close();
}

}  // namespace

TEST(GpuEncodePipeline, BackgroundSetupAndPipelineGiveTheDirectCodes) {
  REQUIRE_GPU();
  const ae::Architecture arch = ae::Architecture::seed();
  char tmpl[] = "/tmp/cae-encode-pipeline-gpu-XXXXXX";
  const std::string dir = mkdtemp(tmpl), model = dir + "/model.h5", data_path = dir + "/data.h5";
  write_scaled_model(model, 1.0f);
  const int64_t n = 2500, chunk = 1024;  // chunks of 1,024, 1,024 and 452
  write_synthetic_dataset(data_path, n, 23);
  cae::DatasetReader data(data_path);
  std::vector<uint8_t> images(size_t(n * data.image_bytes()));
  data.read_images("train", 0, n, images.data());
  const std::vector<cae::ImageView> views = cae::ViewSet(true, 0).views();
  const size_t dim = size_t(arch.latent_dim());

  ae::Encoder background(model, cae::Device::gpu, 0, 256, /*gpu_setup_in_background=*/true);
  ae::Encoder direct(model, cae::Device::gpu, 0, 256), cpu(model, cae::Device::cpu, 0, 256);
  std::vector<std::vector<float>> want(views.size(), std::vector<float>(n * dim));
  for (size_t v = 0; v < views.size(); ++v) {
    direct.encode_view(images.data(), n, views[v], want[v].data(), "train", 0);
    std::vector<float> got(n * dim, std::nanf("")), reference(n * dim);
    background.encode_view(images.data(), n, views[v], got.data(), "train", 0);
    EXPECT_EQ(std::memcmp(got.data(), want[v].data(), got.size() * sizeof(float)), 0) << v;
    cpu.encode_view(images.data(), n, views[v], reference.data(), "train", 0);
    EXPECT_LT(rel_err(got, reference), 2e-3) << v;
  }

  ae::Encoder piped(model, cae::Device::gpu, 0, 256, /*gpu_setup_in_background=*/true);
  ae::EncodePipeline pipeline(data, piped, views, chunk);
  std::vector<std::vector<float>> got(views.size(), std::vector<float>(n * dim, std::nanf("")));
  int calls = 0;
  pipeline.run("train", 0, n, [&](int64_t row, int64_t rows, int v, const float* f) {
    ++calls;
    std::memcpy(got[size_t(v)].data() + row * int64_t(dim), f, size_t(rows) * dim * sizeof(float));
  });
  EXPECT_EQ(calls, 3 * int(views.size()));
  for (size_t v = 0; v < views.size(); ++v)
    EXPECT_EQ(std::memcmp(got[v].data(), want[v].data(), got[v].size() * sizeof(float)), 0) << v;
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

// Encoder::encode_view_halves on the GPU (codes_to_halves, then the halves alone cross the
// bus): the host's rounding of the GPU's float codes, bit for bit, over three chunks and two
// views, through the pipeline's HalfSink too; a finite code beyond ±65504 is CodeBeyondHalf
// naming the first one (row and feature), and codes that overflow float32 are the model's
// non-finite error even where finite codes beyond float16's range come first.
TEST(GpuEncodePipeline, HalvesAreTheGpuCodesRoundedAndTheFirstBadCodeIsNamed) {
  REQUIRE_GPU();
  const ae::Architecture arch = ae::Architecture::seed();
  char tmpl[] = "/tmp/cae-encode-halves-gpu-XXXXXX";
  const std::string dir = mkdtemp(tmpl), model = dir + "/model.h5", data_path = dir + "/data.h5";
  write_scaled_model(model, 1.0f);
  const int64_t n = 2500;
  write_synthetic_dataset(data_path, n, 29);
  cae::DatasetReader data(data_path);
  std::vector<uint8_t> images(size_t(n * data.image_bytes()));
  data.read_images("train", 0, n, images.data());
  const std::vector<cae::ImageView> views = cae::ViewSet(true, 0).views();
  const size_t dim = size_t(arch.latent_dim()), count = size_t(n) * dim;

  ae::Encoder gpu(model, cae::Device::gpu, 0, 256);
  std::vector<std::vector<cae::Half>> want(views.size(), std::vector<cae::Half>(count));
  for (size_t v = 0; v < views.size(); ++v) {
    std::vector<float> codes(count);
    gpu.encode_view(images.data(), n, views[v], codes.data(), "train", 0);
    ASSERT_EQ(cae::floats_to_halves(codes.data(), want[v].data(), count), count);
    std::vector<cae::Half> got(count);
    gpu.encode_view_halves(images.data(), n, views[v], got.data(), "train", 0);
    EXPECT_EQ(std::memcmp(got.data(), want[v].data(), count * sizeof(cae::Half)), 0) << v;
  }
  ae::EncodePipeline pipeline(data, gpu, views, 1024);
  std::vector<std::vector<cae::Half>> piped(views.size(), std::vector<cae::Half>(count));
  pipeline.run("train", 0, n,
               ae::EncodePipeline::HalfSink([&](int64_t row, int64_t rows, int v, const cae::Half* f) {
                 std::memcpy(piped[size_t(v)].data() + row * int64_t(dim), f, size_t(rows) * dim * sizeof(cae::Half));
               }));
  for (size_t v = 0; v < views.size(); ++v)
    EXPECT_EQ(std::memcmp(piped[v].data(), want[v].data(), count * sizeof(cae::Half)), 0) << v;

  // Codes ~1e6 times larger: finite, beyond float16's range from some code of the first chunk on.
  const std::string large = dir + "/large.h5";
  write_scaled_model(large, 1e3f);
  ae::Encoder beyond(large, cae::Device::gpu, 0, 256);
  std::vector<float> codes(count);
  beyond.encode_view(images.data(), n, views[1], codes.data(), "train", 100);
  std::vector<cae::Half> halves(count);
  const size_t first = cae::floats_to_halves(codes.data(), halves.data(), count);
  ASSERT_LT(first, count);
  try {
    beyond.encode_view_halves(images.data(), n, views[1], halves.data(), "train", 100);
    FAIL() << "a code beyond float16's range was rounded";
  } catch (const ae::CodeBeyondHalf& e) {
    EXPECT_EQ(e.row, 100 + int64_t(first / dim));
    EXPECT_EQ(e.feature, int64_t(first % dim));
    EXPECT_EQ(e.value, codes[first]);
  }
  // Codes beyond float32 (~1e40): the model's error, not a storage's.
  const std::string huge = dir + "/huge.h5";
  write_scaled_model(huge, 1e20f);
  ae::Encoder diverged(huge, cae::Device::gpu, 0, 256);
  try {
    diverged.encode_view_halves(images.data(), n, views[0], halves.data(), "train", 0);
    FAIL() << "a non-finite code was rounded";
  } catch (const ae::CodeBeyondHalf&) {
    FAIL() << "a non-finite code was called beyond float16's range";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("huge.h5: its encoder gives a non-finite feature (train image "),
              std::string::npos)
        << e.what();
  }
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}
