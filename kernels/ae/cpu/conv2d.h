// One 3×3 convolution layer (stride 1, pad 1) on ONE image at a time, serially: the
// building block of the training backend, which runs whole images through the network per
// thread so their activations stay in cache (the tests run it over a batch:
// tests/support/cpu_layers.h).
//
// How it maps to GEMM. With taps t = (i,j) ∈ 3×3 and offsets off_t = (i-1, j-1):
//   y[k,p] = b[k] + Σ_{c,t} w[k,c,t] · x[c, p+off_t]
// "Input side" (C <= K): col[(c,t),p] = x[c,p+off_t] (im2col, 9C×HW), y = W[K,9C]·col.
// "Output side" (C > K): z = Wq[9K,C]·x with Wq[(k,t),c] = w[k,c,t], then
//   y[k,p] = Σ_t z[(k,t), p+off_t] (a shifted sum). Same FLOPs, but the rearranged
//   matrix has 9·min(C,K) rows, which keeps the 256→3 output layer from building a
//   2,304-row im2col matrix to produce 3 channels.
// Backward uses the same split: input side builds dcol = Wᵀ·dy and folds it back
// (col2im); output side rearranges dy (9K rows, flipped offsets) and multiplies by Wq.
#pragma once
#include <cstdint>
#include <vector>

namespace ae::cpu {

class Conv3x3 {
 public:
  Conv3x3(int in_channels, int out_channels, int height, int width);

  // Takes the layer's weights [K,C,3,3] for the following calls (keeps the pointer; on
  // the output side also a rearranged copy). Call again after the weights change.
  void set_weights(const float* w);

  // One image: x [C,H,W] → y [K,H,W] = conv + b (+ReLU).
  void forward(const float* x, const float* b, float* y, bool relu) const;

  // One image's gradients. dx [C,H,W] is overwritten (skipped when null); the weight and
  // bias gradients are ADDED to `grad_work` (grad_work_size() floats, in this layer's
  // working layout — see finish_weight_grad).
  void backward(const float* x, const float* dy, float* dx, float* grad_work) const;

  int64_t grad_work_size() const { return int64_t(K_) * C_ * 9 + K_; }
  // Converts a summed grad_work into dw [K,C,3,3] and db [K] (added when `accumulate`).
  void finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const;

  bool output_side() const { return C_ > K_; }

 private:
  int C_, K_, H_, W_;
  const float* w_ = nullptr;  // [K, C*9]
  std::vector<float> wq_;     // [K*9, C] (output side only)
};

// Rearrangements shared with tests. sign = +1: col[(c,t),p] = x[c, p+off_t];
// sign = -1 uses the flipped offsets p-off_t. Zero where the source is outside the image.
void im2col3x3(const float* x, int C, int H, int W, int sign, float* col);
// out[c,p] = init[c] (or 0 when init is null) + Σ_t z[(c,t), p + sign·off_t], then ReLU
// when `relu`. With sign = -1 this is col2im, the adjoint of im2col3x3(+1).
void shift_sum3x3(const float* z, int C, int H, int W, int sign, const float* init, bool relu,
                  float* out);

}  // namespace ae::cpu
