// Direct-loop reference versions of the autoencoder's layers: slow, obviously correct, and
// templated so tests can run them in double precision (finite differences) or in float.
// Same conventions as kernels/ae/cpu/layers.h (NCHW, H×W = input size). Test support: the
// unit tests check the fast CPU layers against these, the GPU tests check the CUDA kernels
// against the fast CPU layers (tests/support/cpu_layers.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ae::ref {

// y = conv3x3(x, w) + b, stride 1, zero padding 1; ReLU when `relu`.
template <typename T>
void conv3x3_forward(const T* x, const T* w, const T* b, T* y, int N, int C, int K, int H, int W,
                     bool relu) {
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int h = 0; h < H; ++h)
        for (int wo = 0; wo < W; ++wo) {
          T sum = b ? b[k] : T(0);
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < 3; ++i)
              for (int j = 0; j < 3; ++j) {
                int hi = h + i - 1, wi = wo + j - 1;
                if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                sum += w[((int64_t(k) * C + c) * 3 + i) * 3 + j] * x[((int64_t(n) * C + c) * H + hi) * W + wi];
              }
          if (relu && sum < T(0)) sum = T(0);
          y[((int64_t(n) * K + k) * H + h) * W + wo] = sum;
        }
}

// Input gradient: scatter every output gradient back through the kernel.
template <typename T>
void conv3x3_backward_data(const T* dy, const T* w, T* dx, int N, int C, int K, int H, int W) {
  for (int64_t i = 0; i < int64_t(N) * C * H * W; ++i) dx[i] = T(0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int h = 0; h < H; ++h)
        for (int wo = 0; wo < W; ++wo) {
          T g = dy[((int64_t(n) * K + k) * H + h) * W + wo];
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < 3; ++i)
              for (int j = 0; j < 3; ++j) {
                int hi = h + i - 1, wi = wo + j - 1;
                if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                dx[((int64_t(n) * C + c) * H + hi) * W + wi] += w[((int64_t(k) * C + c) * 3 + i) * 3 + j] * g;
              }
        }
}

// Weight and bias gradients, summed over the batch (overwrites dw, db).
template <typename T>
void conv3x3_backward_weights(const T* x, const T* dy, T* dw, T* db, int N, int C, int K, int H,
                              int W) {
  for (int64_t i = 0; i < int64_t(K) * C * 9; ++i) dw[i] = T(0);
  for (int k = 0; k < K; ++k) db[k] = T(0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      for (int h = 0; h < H; ++h)
        for (int wo = 0; wo < W; ++wo) {
          T g = dy[((int64_t(n) * K + k) * H + h) * W + wo];
          db[k] += g;
          for (int c = 0; c < C; ++c)
            for (int i = 0; i < 3; ++i)
              for (int j = 0; j < 3; ++j) {
                int hi = h + i - 1, wi = wo + j - 1;
                if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                dw[((int64_t(k) * C + c) * 3 + i) * 3 + j] += g * x[((int64_t(n) * C + c) * H + hi) * W + wi];
              }
        }
}

template <typename T>
void relu_backward(const T* dy, const T* y, T* dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <typename T>
void maxpool2_forward(const T* x, T* y, int32_t* argmax, int N, int C, int H, int W) {
  int Ho = H / 2, Wo = W / 2;
  for (int64_t p = 0; p < int64_t(N) * C; ++p)
    for (int h = 0; h < Ho; ++h)
      for (int wo = 0; wo < Wo; ++wo) {
        // As PyTorch: start from -inf at the first element; a larger value or a NaN takes over.
        int best = (2 * h) * W + 2 * wo;
        T best_v = -std::numeric_limits<T>::infinity();
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) {
            int idx = (2 * h + i) * W + 2 * wo + j;
            T v = x[p * H * W + idx];
            if (v > best_v || std::isnan(v)) best = idx, best_v = v;
          }
        y[(p * Ho + h) * Wo + wo] = best_v;
        argmax[(p * Ho + h) * Wo + wo] = best;
      }
}

template <typename T>
void maxpool2_backward(const T* dy, const int32_t* argmax, T* dx, int N, int C, int H, int W) {
  int64_t out_plane = int64_t(H / 2) * (W / 2);
  for (int64_t i = 0; i < int64_t(N) * C * H * W; ++i) dx[i] = T(0);
  for (int64_t p = 0; p < int64_t(N) * C; ++p)
    for (int64_t o = 0; o < out_plane; ++o) dx[p * H * W + argmax[p * out_plane + o]] += dy[p * out_plane + o];
}

template <typename T>
void upsample2_forward(const T* x, T* y, int N, int C, int H, int W) {
  for (int64_t p = 0; p < int64_t(N) * C; ++p)
    for (int h = 0; h < 2 * H; ++h)
      for (int wo = 0; wo < 2 * W; ++wo) y[(p * 2 * H + h) * 2 * W + wo] = x[(p * H + h / 2) * W + wo / 2];
}

template <typename T>
void upsample2_backward(const T* dy, T* dx, int N, int C, int H, int W) {
  for (int64_t i = 0; i < int64_t(N) * C * H * W; ++i) dx[i] = T(0);
  for (int64_t p = 0; p < int64_t(N) * C; ++p)
    for (int h = 0; h < 2 * H; ++h)
      for (int wo = 0; wo < 2 * W; ++wo) dx[(p * H + h / 2) * W + wo / 2] += dy[(p * 2 * H + h) * 2 * W + wo];
}

// Mean squared error; dpred (optional) = 2 (pred - target) / count.
template <typename T>
T mse_loss(const T* pred, const T* target, int64_t count, T* dpred) {
  T sum = T(0);
  for (int64_t i = 0; i < count; ++i) {
    T d = pred[i] - target[i];
    sum += d * d;
    if (dpred) dpred[i] = T(2) * d / T(count);
  }
  return sum / T(count);
}

}  // namespace ae::ref
