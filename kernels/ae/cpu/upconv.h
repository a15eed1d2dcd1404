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
#include "kernels/ae/cpu/conv3x3_layer.h"
