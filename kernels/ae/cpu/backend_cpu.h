// CPU-backend extras beyond the AeBackend interface (kernels/ae/model.h).
#pragma once
#include <cstdint>
#include <vector>

namespace ae {

// The forward pass's decisions for n images, as the backward pass used them: which element
// of each 2×2 window the max pools picked (index into the 32×32 / 16×16 plane, as PyTorch's
// return_indices) and the activations after each ReLU (> 0: the ReLU passed the gradient).
// A reference implementation can follow them exactly: where a pre-activation lies within
// rounding of zero, or two pool candidates within rounding of each other, fp32 code may
// legitimately decide either way, and one flipped decision moves the whole gradient.
struct ForwardDecisions {
  std::vector<int32_t> pool1_argmax, pool2_argmax;  // [n,256,16,16], [n,128,8,8]
  std::vector<float> pool1, pool2;                  // relu(maxpool(conv)): the same shapes
  std::vector<float> dconv1, dconv2;                // decoder conv1, conv2 after ReLU: [n,128,8,8], [n,256,16,16]
};

// One forward and backward pass over n images, without an optimizer step — for checks
// against PyTorch (ae-train --dump-gradients). Returns the batch-mean MSE; fills
// outputs [n,3,32,32] (decoder output, pixels/255 scale) and grad [kParamCount] (PyTorch
// layout, gradient of the batch-mean MSE), and `decisions` when not null.
double cpu_loss_and_gradient(const std::vector<float>& params, const uint8_t* images, int n, int threads,
                             float* outputs, float* grad, ForwardDecisions* decisions = nullptr);

}  // namespace ae
