// CPU-backend extras beyond the AeBackend interface (kernels/autoencoder.h).
#pragma once
#include <cstdint>
#include <vector>

namespace ae {

// One forward and backward pass over n images, without an optimizer step — for checks
// against PyTorch (ae-train --dump-gradients). Returns the batch-mean MSE; fills
// outputs [n,3,32,32] (decoder output, pixels/255 scale) and grad [kParamCount] (PyTorch
// layout, gradient of the batch-mean MSE).
double cpu_loss_and_gradient(const std::vector<float>& params, const uint8_t* images, int n, int threads,
                             float* outputs, float* grad);

}  // namespace ae
