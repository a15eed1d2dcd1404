// The one declaration of the CPU backend's per-image 3×3 convolution layers: Conv3x3
// (conv2d.h, over the image itself) and UpConv3x3 (upconv.h, over its nearest ×2
// upsampling, computed on the low-resolution input). They offer the same operations on one
// image at a time, serially; they differ in how they rearrange the weights and run the
// GEMMs, so each of conv2d.cpp and upconv.cpp defines the members of its own
// specialization (declared below, after the class).
#pragma once
#include <cstdint>
#include <vector>

namespace ae::cpu {

enum class Conv3x3Input { image, upsampled2 };  // what the 3×3 kernel slides over

template <Conv3x3Input kInput>
class Conv3x3Layer {
 public:
  // height, width: the size of the input x (for upsampled2 the LOW-resolution size; the
  // output is then 2·height × 2·width).
  Conv3x3Layer(int in_channels, int out_channels, int height, int width)
      : C_(in_channels), K_(out_channels), H_(height), W_(width) {}

  // Takes the layer's weights [K,C,3,3] (PyTorch layout) for the following calls. Call
  // again after the weights change.
  void set_weights(const float* w);

  // One image: x [C,H,W] → y [K, output size] = conv + b (+ReLU).
  void forward(const float* x, const float* b, float* y, bool relu) const;

  // One image's gradients. dx [C,H,W] (the gradient w.r.t. x; for upsampled2 that is after
  // the upsampling's backward) is overwritten, skipped when null; the weight and bias
  // gradients are ADDED to `grad_work` (grad_work_size() floats, in this layer's working
  // layout — see finish_weight_grad).
  void backward(const float* x, const float* dy, float* dx, float* grad_work) const;

  int64_t grad_work_size() const { return int64_t(kWorkTaps) * K_ * C_ + K_; }
  // Converts a summed grad_work into dw [K,C,3,3] and db [K] (added when `accumulate`).
  void finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const;

  // More input than output channels: the GEMMs multiply the rearranged weights by x first
  // (the "output side" of conv2d.h), so the rearranged matrix has min(C,K)-many channels.
  bool output_side() const { return C_ > K_; }

 private:
  // Weight taps per (k, c) in the working layout: 3×3, or 4 phases × 2×2.
  static constexpr int kWorkTaps = kInput == Conv3x3Input::image ? 9 : 16;
  int C_, K_, H_, W_;
  const float* w_ = nullptr;    // image: the weights as given, [K, C*9]
  std::vector<float> packed_;  // image, output side: [K*9, C]; upsampled2: the phase kernels
};

// A 3×3 convolution of the image itself (conv2d.h, conv2d.cpp).
using Conv3x3 = Conv3x3Layer<Conv3x3Input::image>;
template <> void Conv3x3::set_weights(const float* w);
template <> void Conv3x3::forward(const float* x, const float* b, float* y, bool relu) const;
template <> void Conv3x3::backward(const float* x, const float* dy, float* dx, float* grad_work) const;
template <> void Conv3x3::finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const;

// Nearest upsampling ×2, then a 3×3 convolution (upconv.h, upconv.cpp).
using UpConv3x3 = Conv3x3Layer<Conv3x3Input::upsampled2>;
template <> void UpConv3x3::set_weights(const float* w);
template <> void UpConv3x3::forward(const float* x, const float* b, float* y, bool relu) const;
template <> void UpConv3x3::backward(const float* x, const float* dy, float* dx, float* grad_work) const;
template <> void UpConv3x3::finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const;

}  // namespace ae::cpu
