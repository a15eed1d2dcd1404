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
#include "kernels/ae/cpu/conv3x3_layer.h"

namespace ae::cpu {

// Rearrangements shared with tests. sign = +1: col[(c,t),p] = x[c, p+off_t];
// sign = -1 uses the flipped offsets p-off_t. Zero where the source is outside the image.
void im2col3x3(const float* x, int C, int H, int W, int sign, float* col);
// out[c,p] = init[c] (or 0 when init is null) + Σ_t z[(c,t), p + sign·off_t], then ReLU
// when `relu`. With sign = -1 this is col2im, the adjoint of im2col3x3(+1).
void shift_sum3x3(const float* z, int C, int H, int W, int sign, const float* init, bool relu,
                  float* out);

}  // namespace ae::cpu
