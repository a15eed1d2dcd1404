// Upsample ×2 + 3×3 convolution as four 2×2 phase convolutions (see upconv.h).
#include "kernels/ae/cpu/upconv.h"

#include <algorithm>

#include "kernels/ae/cpu/scratch.h"
#include "kernels/ae/cpu/conv_gemm.h"

namespace ae::cpu {

namespace {
constexpr int kSlotA = 0, kSlotB = 1, kSlotC = 2;

// Which phase tap (0 or 1) the 3×3 tap i (0..2) joins, for output parity 0 or 1.
inline int phase_tap(int parity, int i) { return parity == 0 ? (i == 0 ? 0 : 1) : (i == 2 ? 1 : 0); }

// Low-resolution offset of phase tap a for output parity `parity`.
inline int tap_offset(int parity, int a) { return a - 1 + parity; }

// col[(c*4 + q), m*W + n] = x[c, m + dy_q, n + dx_q] (zero outside) for phase (py, px).
void gather_phase(const float* x, int C, int H, int W, int py, int px, float* col) {
  const int64_t HW = int64_t(H) * W;
  for (int c = 0; c < C; ++c)
    for (int q = 0; q < 4; ++q) {
      const int dy = tap_offset(py, q >> 1), dx = tap_offset(px, q & 1);
      float* row = col + (int64_t(c) * 4 + q) * HW;
      for (int m = 0; m < H; ++m) {
        const int src_m = m + dy;
        shifted_row(src_m >= 0 && src_m < H ? x + c * HW + int64_t(src_m) * W : nullptr, W, dx, row + int64_t(m) * W);
      }
    }
}

// dx[c, m + dy_q, n + dx_q] += col[(c*4 + q), m*W + n]: the adjoint of gather_phase.
void fold_phase(const float* col, int C, int H, int W, int py, int px, float* dx) {
  const int64_t HW = int64_t(H) * W;
  for (int c = 0; c < C; ++c)
    for (int q = 0; q < 4; ++q) {
      const int dy = tap_offset(py, q >> 1), dxo = tap_offset(px, q & 1);
      const int w0 = std::max(0, -dxo), w1 = std::min(W, W - dxo);
      const int h0 = std::max(0, -dy), h1 = std::min(H, H - dy);
      const float* row = col + (int64_t(c) * 4 + q) * HW;
      for (int m = h0; m < h1; ++m) {
        float* dst = dx + c * HW + int64_t(m + dy) * W + dxo;
        const float* src = row + int64_t(m) * W;
        for (int n = w0; n < w1; ++n) dst[n] += src[n];
      }
    }
}
}  // namespace

template <>
void UpConv3x3::set_weights(const float* w) {
  packed_.assign(static_cast<size_t>(16) * K_ * C_, 0.0f);
  for (int k = 0; k < K_; ++k)
    for (int c = 0; c < C_; ++c)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          const float v = w[(int64_t(k) * C_ + c) * 9 + i * 3 + j];
          for (int p = 0; p < 4; ++p) {
            const int q = phase_tap(p >> 1, i) * 2 + phase_tap(p & 1, j);
            const int64_t idx = output_side() ? ((int64_t(p) * K_ + k) * 4 + q) * C_ + c
                                              : ((int64_t(p) * K_ + k) * C_ + c) * 4 + q;
            packed_[idx] += v;
          }
        }
}

template <>
void UpConv3x3::forward(const float* x, const float* b, float* y, bool relu) const {
  const int64_t HW = int64_t(H_) * W_;
  const int Wo = 2 * W_;
  const int64_t out_plane = 4 * HW;
  if (!output_side()) {
    float* col = scratch(kSlotA, 4 * C_ * HW);
    float* yp = scratch(kSlotB, K_ * HW);
    for (int p = 0; p < 4; ++p) {
      const int py = p >> 1, px = p & 1;
      gather_phase(x, C_, H_, W_, py, px, col);
      sgemm(CblasNoTrans, CblasNoTrans, K_, HW, 4 * C_, packed_.data() + int64_t(p) * K_ * 4 * C_, 4 * C_, col, HW, 0.0f,
            yp, HW);
      for (int k = 0; k < K_; ++k) {
        const float bk = b ? b[k] : 0.0f;
        const float* src = yp + k * HW;
        float* dst = y + k * out_plane + py * Wo + px;
        for (int m = 0; m < H_; ++m)
          for (int n = 0; n < W_; ++n) {
            float v = src[m * W_ + n] + bk;
            if (relu) v = std::max(v, 0.0f);
            dst[int64_t(2 * m) * Wo + 2 * n] = v;
          }
      }
    }
  } else {
    float* z = scratch(kSlotA, 16 * K_ * HW);
    sgemm(CblasNoTrans, CblasNoTrans, 16 * K_, HW, C_, packed_.data(), C_, x, HW, 0.0f, z, HW);
    float* acc = scratch(kSlotB, W_);  // one output row of one phase
    for (int p = 0; p < 4; ++p) {
      const int py = p >> 1, px = p & 1;
      for (int k = 0; k < K_; ++k) {
        const float bk = b ? b[k] : 0.0f;
        float* dst = y + k * out_plane + py * Wo + px;
        for (int m = 0; m < H_; ++m) {
          std::fill(acc, acc + W_, bk);
          for (int q = 0; q < 4; ++q) {
            const int dy = tap_offset(py, q >> 1), dx = tap_offset(px, q & 1);
            if (m + dy < 0 || m + dy >= H_) continue;
            const int w0 = std::max(0, -dx), w1 = std::min(W_, W_ - dx);
            const float* zr = z + ((int64_t(p) * K_ + k) * 4 + q) * HW + int64_t(m + dy) * W_ + dx;
            for (int n = w0; n < w1; ++n) acc[n] += zr[n];
          }
          for (int n = 0; n < W_; ++n) dst[int64_t(2 * m) * Wo + 2 * n] = relu ? std::max(acc[n], 0.0f) : acc[n];
        }
      }
    }
  }
}

template <>
void UpConv3x3::backward(const float* x, const float* dy, float* dx, float* grad_work) const {
  const int64_t HW = int64_t(H_) * W_;
  const int Wo = 2 * W_;
  const int64_t out_plane = 4 * HW;
  if (grad_work) add_bias_grad(dy, K_, out_plane, grad_work + int64_t(16) * K_ * C_);
  if (!output_side()) {
    float* dyp = scratch(kSlotB, K_ * HW);
    float* dcol = dx ? scratch(kSlotA, 4 * C_ * HW) : nullptr;
    float* col = grad_work ? scratch(kSlotC, 4 * C_ * HW) : nullptr;
    if (dx) std::fill(dx, dx + C_ * HW, 0.0f);
    for (int p = 0; p < 4; ++p) {
      const int py = p >> 1, px = p & 1;
      for (int k = 0; k < K_; ++k) {
        const float* src = dy + k * out_plane + py * Wo + px;
        float* dst = dyp + k * HW;
        for (int m = 0; m < H_; ++m)
          for (int n = 0; n < W_; ++n) dst[m * W_ + n] = src[int64_t(2 * m) * Wo + 2 * n];
      }
      const float* wp = packed_.data() + int64_t(p) * K_ * 4 * C_;
      if (dx) {
        sgemm(CblasTrans, CblasNoTrans, 4 * C_, HW, K_, wp, 4 * C_, dyp, HW, 0.0f, dcol, HW);
        fold_phase(dcol, C_, H_, W_, py, px, dx);
      }
      if (grad_work) {
        gather_phase(x, C_, H_, W_, py, px, col);
        sgemm(CblasNoTrans, CblasTrans, K_, 4 * C_, HW, dyp, HW, col, HW, 1.0f, grad_work + int64_t(p) * K_ * 4 * C_,
              4 * C_);
      }
    }
  } else {
    // dys[(p,k,q), r] = dy_p[k, r - off_q] with dy_p[k, m, n] = dy[k, 2m+py, 2n+px].
    float* dys = scratch(kSlotA, 16 * K_ * HW);
    for (int p = 0; p < 4; ++p) {
      const int py = p >> 1, px = p & 1;
      for (int k = 0; k < K_; ++k) {
        const float* src = dy + k * out_plane + py * Wo + px;
        for (int q = 0; q < 4; ++q) {
          const int oy = tap_offset(py, q >> 1), ox = tap_offset(px, q & 1);
          float* row = dys + ((int64_t(p) * K_ + k) * 4 + q) * HW;
          for (int r = 0; r < H_; ++r) {
            float* dst = row + int64_t(r) * W_;
            const int m = r - oy;
            if (m < 0 || m >= H_) {
              std::fill(dst, dst + W_, 0.0f);
              continue;
            }
            for (int c = 0; c < W_; ++c) {
              const int n = c - ox;
              dst[c] = (n >= 0 && n < W_) ? src[int64_t(2 * m) * Wo + 2 * n] : 0.0f;
            }
          }
        }
      }
    }
    if (dx) sgemm(CblasTrans, CblasNoTrans, C_, HW, 16 * K_, packed_.data(), C_, dys, HW, 0.0f, dx, HW);
    if (grad_work) sgemm(CblasNoTrans, CblasTrans, 16 * K_, C_, HW, dys, HW, x, HW, 1.0f, grad_work, C_);
  }
}

template <>
void UpConv3x3::finish_weight_grad(const float* grad_work, float* dw, float* db, bool accumulate) const {
  if (dw) {
    for (int k = 0; k < K_; ++k)
      for (int c = 0; c < C_; ++c)
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j) {
            float g = 0.0f;
            for (int p = 0; p < 4; ++p) {
              const int q = phase_tap(p >> 1, i) * 2 + phase_tap(p & 1, j);
              g += output_side() ? grad_work[((int64_t(p) * K_ + k) * 4 + q) * C_ + c]
                                 : grad_work[((int64_t(p) * K_ + k) * C_ + c) * 4 + q];
            }
            const int64_t dst = (int64_t(k) * C_ + c) * 9 + i * 3 + j;
            dw[dst] = accumulate ? dw[dst] + g : g;
          }
  }
  if (db) {
    const float* gb = grad_work + int64_t(16) * K_ * C_;
    for (int k = 0; k < K_; ++k) db[k] = accumulate ? db[k] + gb[k] : gb[k];
  }
}

}  // namespace ae::cpu
