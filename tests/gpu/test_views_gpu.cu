// ae-encode's views on the GPU: Encoder::encode_view of every view of "flip,shift:2" (the
// pixels made on the host by ae::make_view, then the GPU backend) against the CPU encoder's
// codes of the same view, within the GPU backend's fp32 encode tolerance, over more than one
// 1024-image chunk; each view's codes differ from the original's.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/provenance.h"
#include "common/view_set.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/encoder.h"
#include "kernels/ae/model.h"
#include "tests/gpu/gpu_test_util.h"

using namespace gpu_test;

TEST(GpuViews, EncodeOfEveryViewMatchesTheCpuEncoder) {
  REQUIRE_GPU();
  const ae::Architecture arch = ae::Architecture::seed();
  char tmpl[] = "/tmp/cae-views-gpu-XXXXXX";
  const std::string dir = mkdtemp(tmpl), path = dir + "/model.h5";
  ae::Checkpoint c;
  c.arch = arch;
  c.params = ae::init_params(arch, 7);
  c.optimizer_kind = "adam";
  ae::write_checkpoint(path, path, c, cae::Provenance{"ae-model", 1, "{}", {}});
  const int n = 1100;
  const std::vector<uint8_t> images = synthetic_images(n, 17);
  ae::Encoder cpu(path, cae::Device::cpu, 0, 100), gpu(path, cae::Device::gpu, 0, 100);
  const size_t dim = size_t(arch.latent_dim());
  std::vector<float> original(size_t(n) * dim);
  cpu.encode_view(images.data(), n, {}, original.data(), "test", 0);
  for (const cae::ImageView& view : cae::ViewSet(true, 2).views()) {
    std::vector<float> want(size_t(n) * dim), got(size_t(n) * dim, std::nanf(""));
    cpu.encode_view(images.data(), n, view, want.data(), "test", 0);
    gpu.encode_view(images.data(), n, view, got.data(), "test", 0);
    const double err = rel_err(got, want);
    std::printf("    %s: rel err %.2e\n", cae::features_dataset(view).c_str(), err);
    EXPECT_LT(err, 2e-3) << cae::features_dataset(view);
    if (view.shift || view.mirrored) {
      EXPECT_GT(rel_err(want, original), 1e-2) << cae::features_dataset(view);
    }
  }
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}
