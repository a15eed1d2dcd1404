// Nearest upsampling ×2 followed by a 3×3 convolution (stride 1, pad 1), computed on the
// low-resolution input without building the upsampled tensor: the decoder's
// "upsample → conv" pairs. One image at a time, serially (like Conv3x3 in conv2d.h).
//
// Why: on a nearest-upsampled input, the output pixels of each parity (py, px) see only
// 2×2 distinct input pixels, so the 3×3 kernel collapses to four 2×2 "phase" kernels
// whose taps are sums of the original taps. In one dimension, with u[i] = a[i/2]:
//   y[2m]   = w0·a[m-1] + (w1+w2)·a[m]
//   y[2m+1] = (w0+w1)·a[m] + w2·a[m+1]
// (the zero padding of u is the zero padding of a). Per output pixel that is 4 instead of
// 9 multiply-adds: 2.25× fewer FLOPs for the same result (up to float rounding of the
// summed taps), and the upsampled tensor is never written.
//
// Phase p = 2·py + px, tap q = 2·a + b reads a[m + a - 1 + py, n + b - 1 + px].
// Same input-side / output-side split as Conv3x3 (9·min(C,K) → 16·min(C,K) rearranged rows):
// input side: per phase, col_p[(c,q), mn] then Y_p = W_p[K,4C]·col_p (4 GEMMs);
// output side: Z[(p,k,q), mn] = Wq[16K,C]·a (one GEMM), then shifted sums per phase.
#pragma once
#include <cstdint>
#include <vector>

namespace ae::cpu {

class UpConv3x3 {
 public:
  // height, width: the LOW-resolution input size; the output is 2·height × 2·width.
  UpConv3x3(int in_channels, int out_channels, int height, int width);

  // Takes the 3×3 weights [K,C,3,3] and builds the phase kernels. Call again after the
  // weights change.
  void set_weights(const float* w);

  // x [C,H,W] → y [K,2H,2W] = conv3x3(upsample2(x)) + b (+ReLU).
  void forward(const float* x, const float* b, float* y, bool relu) const;

  // dy [K,2H,2W] → dx [C,H,W] (the gradient w.r.t. the low-resolution input, i.e. after
  // the upsampling's backward; skipped when null). Weight/bias gradients are ADDED to
  // grad_work (grad_work_size() floats, phase layout — see finish_weight_grad).
  void backward(const float* x, const float* dy, float* dx, float* grad_work) const;

  int64_t grad_work_size() const { return int64_t(16) * K_ * C_ + K_; }
  // Folds a summed grad_work back onto the 3×3 taps: dw [K,C,3,3], db [K] (added when
  // `accumulate`).
  void finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const;

  bool output_side() const { return C_ > K_; }

 private:
  int C_, K_, H_, W_;
  // input side: 4 phases × [K, C*4]; output side: [(p,k,q), C] = [16K, C].
  std::vector<float> wp_;
};

}  // namespace ae::cpu
