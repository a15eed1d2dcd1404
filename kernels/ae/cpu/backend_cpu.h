// CPU-backend extras beyond the AeBackend interface (kernels/ae/backend.h): one forward and
// backward pass without an optimizer step, with the forward pass's decisions, for the
// check against PyTorch (ae-train --dump-gradients, tests/python/torch_reference.py).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ae/model.h"

namespace ae {

// One named tensor of ForwardDecisions, ready to write as /decisions/<name> with `shape`.
// Exactly one of f32 / i32 is set; it points into the ForwardDecisions it came from.
struct DecisionTensor {
  std::string name;             // "pool1_argmax", "pool1", ..., "dconv1", ...
  std::vector<uint64_t> shape;  // [n, channels, height, width]
  const float* f32 = nullptr;
  const int32_t* i32 = nullptr;
};

// The forward pass's decisions for n images, as the backward pass used them: which element
// of each 2×2 window the max pools picked and the activations after each ReLU (> 0: the
// ReLU passed the gradient). A reference implementation can follow them exactly: where a
// pre-activation lies within rounding of zero, or two pool candidates within rounding of
// each other, fp32 code may legitimately decide either way, and one flipped decision moves
// the whole gradient.
struct ForwardDecisions {
  int n = 0;  // images
  // Per encoder block i = 1..k (index i−1), both [n, c_i, H/2^i, W/2^i]:
  std::vector<std::vector<int32_t>> pool_argmax;  // index into the conv's H/2^(i−1) × W/2^(i−1)
                                                  // plane (h·W + w), as PyTorch's return_indices
  std::vector<std::vector<float>> pool;           // relu(maxpool(conv)); pool[k−1] is the latent
  // Per decoder layer with a ReLU, decoder conv1..convk (index j−1): its output after the
  // ReLU, [n, out, H, W] of that layer (ConvLayer::out, H, W).
  std::vector<std::vector<float>> relu;

  // Everything above with the names torch_reference.py reads: pool<i>_argmax and pool<i>
  // for i = 1..k, dconv<j> for j = 1..k (the seed model's six tensors keep their names).
  // The pointers stay valid while this object is alive and unchanged.
  std::vector<DecisionTensor> tensors(const Architecture& arch) const;
};

// One forward and backward pass of `arch` over n images [n, C, H, W], without an optimizer
// step. Returns the batch-mean MSE; fills outputs [n, C, H, W] (decoder output, pixels/255
// scale; skipped when null) and grad [arch.param_count()] (PyTorch layout, gradient of the
// batch-mean MSE), and `decisions` when not null.
double cpu_loss_and_gradient(const Architecture& arch, const std::vector<float>& params, const uint8_t* images, int n,
                             int threads, float* outputs, float* grad, ForwardDecisions* decisions = nullptr);

}  // namespace ae
