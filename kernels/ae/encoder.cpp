#include "kernels/ae/encoder.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/timer.h"
#include "kernels/ae/augment.h"

namespace ae {

Encoder::Encoder(const std::string& model_path, const cae::DeviceChoice& device, int threads, int batch,
                 bool gpu_setup_in_background)
    : model_path_(model_path), model_(read_ae_params(model_path)), batch_(batch), threads_(threads) {
  // The weights are read here, on the caller's thread: the setup thread touches no file, and
  // builds only a GPU backend (a CPU one, whose threads are the caller's, is built by backend()).
  if (gpu_setup_in_background && device.may_use_gpu())
    backend_setup_ = std::async(std::launch::async, [this, device]() -> std::unique_ptr<AeBackend> {
      return device.get() == cae::Device::gpu ? make(cae::Device::gpu) : nullptr;
    });
  else
    backend_ = make(device.get());
}

std::unique_ptr<AeBackend> Encoder::make(cae::Device device) const {
  std::unique_ptr<AeBackend> b = make_backend(device, model_.arch, OptimizerConfig{}, Precision::fp32, threads_);
  b->set_params(model_.params);
  return b;
}

AeBackend& Encoder::backend() const {
  if (backend_setup_.valid()) {
    backend_ = backend_setup_.get();
    if (!backend_) backend_ = make(cae::Device::cpu);  // --device auto found no GPU
  }
  return *backend_;
}

void Encoder::check_input(const std::string& data, int C, int H, int W, const std::string& shape) const {
  const Architecture& a = model_.arch;
  if (C != a.input_channels() || H != a.height() || W != a.width())
    cae::fail_file(data, "has images of " + shape + " but " + model_path_ + " was trained on " +
                             std::to_string(a.input_channels()) + "x" + std::to_string(a.height()) + "x" +
                             std::to_string(a.width()));
}

void Encoder::encode(const uint8_t* images, int64_t n, float* codes, float* mirrored_codes, const std::string& what,
                     int64_t first_row) {
  encode_checked(images, n, codes, what, first_row);
  if (mirrored_codes) encode_view(images, n, cae::ImageView{0, true}, mirrored_codes, what, first_row);
}

const uint8_t* Encoder::view_of(const uint8_t* images, int64_t n, const cae::ImageView& view) {
  if (view == cae::ImageView{}) return images;
  const Architecture& a = model_.arch;
  view_pixels_.resize(static_cast<size_t>(n * a.image_dim()));
  make_view(images, n, a.input_channels(), a.height(), a.width(), view, view_pixels_.data());
  return view_pixels_.data();
}

// What an error names the images by: "test", or with their view, "flipped test".
static std::string view_what(const cae::ImageView& view, const std::string& what) {
  return view == cae::ImageView{} ? what : cae::view_label(view) + " " + what;
}

void Encoder::encode_view(const uint8_t* images, int64_t n, const cae::ImageView& view, float* codes,
                          const std::string& what, int64_t first_row) {
  encode_checked(view_of(images, n, view), n, codes, view_what(view, what), first_row);
}

CodeBeyondHalf::CodeBeyondHalf(int64_t row_, int64_t feature_, float value_)
    : std::runtime_error("row " + std::to_string(row_) + " feature " + std::to_string(feature_) +
                         " is beyond float16's range (±65504)"),
      row(row_),
      feature(feature_),
      value(value_) {}

void Encoder::encode_view_halves(const uint8_t* images, int64_t n, const cae::ImageView& view, cae::Half* codes,
                                 const std::string& what, int64_t first_row) {
  const uint8_t* pixels = view_of(images, n, view);
  cae::Stopwatch clock;
  const HalfFault fault = backend().encode_halves(pixels, n, batch_, codes);
  seconds_ += clock.seconds();
  if (!fault) return;
  const int64_t dim = model_.arch.latent_dim();
  if (!std::isfinite(fault.value)) fail_non_finite(view_what(view, what), first_row + fault.index / dim, fault.index % dim);
  throw CodeBeyondHalf(first_row + fault.index / dim, fault.index % dim, fault.value);
}

void Encoder::fail_non_finite(const std::string& what, int64_t row, int64_t feature) const {
  cae::fail_file(model_path_, "its encoder gives a non-finite feature (" + what + " image " + std::to_string(row) +
                                  ", feature " + std::to_string(feature) +
                                  "): the weights overflow on these images; retrain (a smaller --lr) or check the model");
}

void Encoder::encode_checked(const uint8_t* images, int64_t n, float* codes, const std::string& what,
                             int64_t first_row) {
  cae::Stopwatch clock;
  backend().encode(images, n, batch_, codes);
  seconds_ += clock.seconds();
  const int64_t dim = model_.arch.latent_dim(), count = n * dim;
  int64_t bad = count;
#pragma omp parallel for schedule(static) reduction(min : bad)
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(codes[i])) bad = std::min(bad, i);
  if (bad < count) fail_non_finite(what, first_row + bad / dim, bad % dim);
}

}  // namespace ae
