// 3×3 convolution (stride 1, pad 1) on the CPU: rearrangement + OpenBLAS sgemm per image.
// See kernels/ae/cpu/conv2d.h for the GEMM mapping.
#include "kernels/ae/cpu/conv2d.h"

#include <algorithm>

#include "kernels/ae/cpu/scratch.h"
#include "kernels/ae/cpu/conv_gemm.h"

namespace ae::cpu {

namespace {
// Scratch slots (per thread, see scratch.h).
constexpr int kSlotRearranged = 0;  // im2col / dcol / z / rearranged dy
constexpr int kSlotCol = 1;         // im2col of x for the weight gradient on the input side
}  // namespace

void im2col3x3(const float* x, int C, int H, int W, int sign, float* col) {
  const int64_t HW = int64_t(H) * W;
  for (int c = 0; c < C; ++c) {
    const float* plane = x + c * HW;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        const int di = sign * (i - 1), dj = sign * (j - 1);
        float* row = col + (int64_t(c) * 9 + i * 3 + j) * HW;
        for (int h = 0; h < H; ++h) {
          const int hi = h + di;
          shifted_row(hi >= 0 && hi < H ? plane + int64_t(hi) * W : nullptr, W, dj, row + int64_t(h) * W);
        }
      }
  }
}

void shift_sum3x3(const float* z, int C, int H, int W, int sign, const float* init, bool relu,
                  float* out) {
  const int64_t HW = int64_t(H) * W;
  for (int c = 0; c < C; ++c) {
    float* o = out + c * HW;
    std::fill(o, o + HW, init ? init[c] : 0.0f);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        const int di = sign * (i - 1), dj = sign * (j - 1);
        const int w0 = std::max(0, -dj), w1 = std::min(W, W - dj);
        const int h0 = std::max(0, -di), h1 = std::min(H, H - di);
        const float* zr = z + (int64_t(c) * 9 + i * 3 + j) * HW;
        for (int h = h0; h < h1; ++h) {
          float* orow = o + int64_t(h) * W;
          const float* zrow = zr + int64_t(h + di) * W + dj;  // in range for w in [w0, w1)
          for (int w = w0; w < w1; ++w) orow[w] += zrow[w];
        }
      }
    if (relu)
      for (int64_t p = 0; p < HW; ++p) o[p] = std::max(o[p], 0.0f);
  }
}

template <>
void Conv3x3::set_weights(const float* w) {
  w_ = w;
  if (!output_side()) return;
  // wq[(k,t), c] = w[k, c, t]
  packed_.resize(static_cast<size_t>(K_) * C_ * 9);
  for (int k = 0; k < K_; ++k)
    for (int c = 0; c < C_; ++c)
      for (int t = 0; t < 9; ++t) packed_[(int64_t(k) * 9 + t) * C_ + c] = w[(int64_t(k) * C_ + c) * 9 + t];
}

template <>
void Conv3x3::forward(const float* x, const float* b, float* y, bool relu) const {
  const int64_t HW = int64_t(H_) * W_;
  if (!output_side()) {
    float* col = scratch(kSlotRearranged, 9 * C_ * HW);
    im2col3x3(x, C_, H_, W_, +1, col);
    for (int k = 0; k < K_; ++k) std::fill(y + k * HW, y + (k + 1) * HW, b ? b[k] : 0.0f);
    sgemm(CblasNoTrans, CblasNoTrans, K_, HW, 9 * C_, w_, 9 * C_, col, HW, 1.0f, y, HW);
    if (relu)
      for (int64_t i = 0; i < K_ * HW; ++i) y[i] = std::max(y[i], 0.0f);
  } else {
    float* z = scratch(kSlotRearranged, 9 * K_ * HW);
    sgemm(CblasNoTrans, CblasNoTrans, 9 * K_, HW, C_, packed_.data(), C_, x, HW, 0.0f, z, HW);
    shift_sum3x3(z, K_, H_, W_, +1, b, relu, y);
  }
}

template <>
void Conv3x3::backward(const float* x, const float* dy, float* dx, float* grad_work) const {
  const int64_t HW = int64_t(H_) * W_;
  if (grad_work) add_bias_grad(dy, K_, HW, grad_work + int64_t(K_) * C_ * 9);
  if (!output_side()) {
    if (dx) {
      // dcol[(c,t),p] = Σ_k w[k,(c,t)] dy[k,p], folded back onto the input (col2im).
      float* dcol = scratch(kSlotRearranged, 9 * C_ * HW);
      sgemm(CblasTrans, CblasNoTrans, 9 * C_, HW, K_, w_, 9 * C_, dy, HW, 0.0f, dcol, HW);
      shift_sum3x3(dcol, C_, H_, W_, -1, nullptr, false, dx);
    }
    if (grad_work) {
      float* col = scratch(kSlotCol, 9 * C_ * HW);
      im2col3x3(x, C_, H_, W_, +1, col);
      sgemm(CblasNoTrans, CblasTrans, K_, 9 * C_, HW, dy, HW, col, HW, 1.0f, grad_work, 9 * C_);
    }
  } else {
    // dys[(k,t),q] = dy[k, q-off_t]; then dx = Wqᵀ·dys and dWq += dys·xᵀ.
    float* dys = scratch(kSlotRearranged, 9 * K_ * HW);
    im2col3x3(dy, K_, H_, W_, -1, dys);
    if (dx) sgemm(CblasTrans, CblasNoTrans, C_, HW, 9 * K_, packed_.data(), C_, dys, HW, 0.0f, dx, HW);
    if (grad_work) sgemm(CblasNoTrans, CblasTrans, 9 * K_, C_, HW, dys, HW, x, HW, 1.0f, grad_work, C_);
  }
}

template <>
void Conv3x3::finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const {
  const int64_t wcount = int64_t(K_) * C_ * 9;
  if (dw) {
    for (int k = 0; k < K_; ++k)
      for (int c = 0; c < C_; ++c)
        for (int t = 0; t < 9; ++t) {
          const int64_t dst = (int64_t(k) * C_ + c) * 9 + t;
          const float g = output_side() ? grad_work[(int64_t(k) * 9 + t) * C_ + c] : grad_work[dst];
          dw[dst] = accumulate ? dw[dst] + g : g;
        }
  }
  if (db)
    for (int k = 0; k < K_; ++k) db[k] = accumulate ? db[k] + grad_work[wcount + k] : grad_work[wcount + k];
}

}  // namespace ae::cpu
