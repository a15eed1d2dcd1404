// What the CPU backend (kernels/ae/cpu/backend_cpu.h) computes inside a training step, for
// code that compares it with another implementation: the unit tests, the GPU backend's
// tests (tests/gpu/test_backend_gpu.cu) and the dev tool tests/dev/ae_dump_gradients.cpp
// that tests/python/torch_reference.py compares with PyTorch. One step's gradient without
// an optimizer step, and what one image's forward pass decided. No tool calls these.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ae/model.h"

namespace ae {

// One image's forward pass as a training step computes it, at the points where fp32 code
// may decide either way within rounding (a pre-activation at zero, two pool candidates
// alike), so a reference implementation can follow the same decisions:
struct ForwardTrace {
  // Per encoder block i = 1..k (index i−1), both [c_i, H/2^i, W/2^i]: which element of each
  // 2×2 window the max pool picked, as an index into the conv's plane (h·W + w, PyTorch's
  // return_indices), and relu(maxpool(conv)); pool[k−1] is the latent.
  std::vector<std::vector<int32_t>> pool_argmax;
  std::vector<std::vector<float>> pool;
  // Per decoder conv1..convk (index j−1): its output after the ReLU, [out, H, W] of that layer.
  std::vector<std::vector<float>> relu;
};

// One forward and backward pass of `arch` over n images [n, C, H, W] — the training step's
// code, without the optimizer step. Returns the batch-mean MSE; fills outputs [n, C, H, W]
// (decoder output, pixels/255 scale; skipped when null) and grad [arch.param_count()]
// (PyTorch layout, gradient of the batch-mean MSE).
double cpu_loss_and_gradient(const Architecture& arch, const std::vector<float>& params, const uint8_t* images, int n,
                             int threads, float* outputs, float* grad);

// The forward traces of n images [n, C, H, W] (one per image).
std::vector<ForwardTrace> cpu_forward_traces(const Architecture& arch, const std::vector<float>& params,
                                             const uint8_t* images, int n);

}  // namespace ae
