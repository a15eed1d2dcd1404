// A trained model's encoder on a device, as ae-encode and classify use it: the latent
// codes of images and of their views (--flip, --shifts, --tta flip: cae::ViewSet). A code that is
// not finite (a diverged model's weights overflow on some image) is refused here: it would
// poison every kernel value downstream.
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/view_set.h"
#include "kernels/ae/backend.h"
#include "kernels/ae/checkpoint.h"

namespace ae {

// A finite code beyond float16's range (±65504), found by Encoder::encode_view_halves: the
// image's row, the feature and the value; EncodePipeline adds the view (an index into its
// views), and ae-encode names its file and dataset and asks for --feature-dtype float32.
struct CodeBeyondHalf : std::runtime_error {
  CodeBeyondHalf(int64_t row, int64_t feature, float value);
  int64_t row, feature;
  float value;
  int view = 0;
};

class Encoder {
 public:
  // Reads the weights of `model_path` (an ae-model file) and sets up the backend; `batch`
  // images per encoder pass, `threads` <= 0: OpenMP's default. With `gpu_setup_in_background`
  // the device's answer (DeviceChoice) and a GPU backend (the CUDA context) are
  // awaited and set up on a thread of its own while the caller goes on (reading its inputs:
  // docs/DECISIONS.md, "ae-encode overlaps reading, encoding and writing on one I/O thread");
  // the first call that needs the backend waits for it and rethrows its failure. Only for a
  // caller whose thread uses the default GPU: the CUDA device chosen by cudaSetDevice is the
  // calling thread's alone.
  Encoder(const std::string& model_path, const cae::DeviceChoice& device, int threads, int batch,
          bool gpu_setup_in_background = false);
  Encoder(const Encoder&) = delete;  // the setup thread holds `this`
  Encoder& operator=(const Encoder&) = delete;

  const Architecture& architecture() const { return model_.arch; }
  std::string describe() const { return backend().describe(); }
  // Fails naming `data` unless images of C×H×W (`shape`, as "3x32x32") are the model's input.
  void check_input(const std::string& data, int C, int H, int W, const std::string& shape) const;

  // The codes [n, latent_dim] of n images [n, C, H, W] and, when `mirrored_codes` is not
  // null, those of their mirrors. A non-finite code fails naming the model and the image
  // (`what` image first_row + i, e.g. "test image 12").
  void encode(const uint8_t* images, int64_t n, float* codes, float* mirrored_codes, const std::string& what,
              int64_t first_row);
  // The codes [n, latent_dim] of `view` of n images (its pixels made on the host by
  // make_view, a chunk at a time); the identity view is encode() without mirrors.
  void encode_view(const uint8_t* images, int64_t n, const cae::ImageView& view, float* codes, const std::string& what,
                   int64_t first_row);
  // encode_view() with the codes as a features file stores them, rounded to float16 (on the
  // GPU as they come out of the encoder: AeBackend::encode_halves). A code that is not finite
  // fails as encode_view's do; one beyond float16's range throws CodeBeyondHalf.
  void encode_view_halves(const uint8_t* images, int64_t n, const cae::ImageView& view, cae::Half* codes,
                          const std::string& what, int64_t first_row);
  double seconds() const { return seconds_; }  // inside the backend so far

 private:
  void encode_checked(const uint8_t* images, int64_t n, float* codes, const std::string& what, int64_t first_row);
  // The pixels of `view` of n images: `images` itself for the identity view, else view_pixels_.
  const uint8_t* view_of(const uint8_t* images, int64_t n, const cae::ImageView& view);
  [[noreturn]] void fail_non_finite(const std::string& what, int64_t row, int64_t feature) const;
  AeBackend& backend() const;  // waits for a background setup
  std::unique_ptr<AeBackend> make(cae::Device device) const;  // a backend with the model's weights
  std::string model_path_;
  ModelWeights model_;
  mutable std::future<std::unique_ptr<AeBackend>> backend_setup_;  // valid until backend() took its result
  mutable std::unique_ptr<AeBackend> backend_;
  int batch_;
  int threads_;
  std::vector<uint8_t> view_pixels_;  // one chunk of a view's pixels
  double seconds_ = 0;
};

}  // namespace ae
