// The CPU backend of the autoencoder (AeBackend, kernels/ae/backend.h): the class, so that
// code that checks it from outside (tests/support/cpu_gradient.h: one step's gradient
// without an optimizer step, one image's forward decisions) can build on its per-image
// building blocks. The tools create it only through make_cpu_backend (backend.h); how a
// step runs is described in backend_cpu.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ae/backend.h"
#include "kernels/ae/cpu/conv2d.h"
#include "kernels/ae/cpu/upconv.h"
#include "kernels/ae/model.h"

namespace ae {

class CpuBackend final : public AeBackend {
 public:
  // One image's activations and gradients (sizes per image, C×H×W). k = arch.depth().
  struct Workspace {
    std::vector<float> x;                   // input, pixels/255
    std::vector<std::vector<float>> z;      // z[i]: encoder conv i+1 before its ReLU
    std::vector<std::vector<float>> p;      // p[i]: relu(maxpool(z[i])); p[k−1] is the latent
    std::vector<std::vector<int32_t>> arg;  // arg[i]: the pool's picks, p[i]'s shape
    std::vector<std::vector<float>> a;      // a[j]: decoder conv j+1 after its ReLU (shape of p[k−1−j])
    std::vector<float> out;                 // decoder conv k+1: the reconstruction
    // Gradients. g[m] (p[m]'s shape) first holds the decoder's d(a[k−1−m]), then, once the
    // decoder is done, the encoder's d(p[m]) — the two lifetimes do not overlap.
    std::vector<float> dout, dlatent;
    std::vector<std::vector<float>> g, dz;  // dz[i]: z[i]'s shape

    explicit Workspace(const Architecture& arch);
  };

  // threads <= 0: OpenMP's default.
  CpuBackend(const Architecture& arch, const OptimizerConfig& opt, int threads);

  std::string describe() const override;
  const Architecture& architecture() const override { return arch_; }
  void set_params(const std::vector<float>& params) override;
  std::vector<float> params() const override { return params_; }
  void set_optimizer_state(const OptimizerState& s) override;
  OptimizerState optimizer_state() const override { return state_; }
  void set_train_images(const uint8_t* images, int64_t n) override;
  double train_epoch(const std::vector<int64_t>& order, int batch, float lr, const StepCallback& on_progress) override;
  double eval_loss(const uint8_t* images, int64_t n, int batch) override;
  void reconstruct(const uint8_t* images, int64_t n, float* out) override;
  void encode(const uint8_t* images, int64_t n, int batch, float* latent) override;

  // Forward and backward over images train_[idx[0..b)] without a step: gradient() receives
  // the gradient of the batch-mean MSE (PyTorch layout), `outputs` (when not null) the
  // decoder outputs [b,C,H,W]. Returns Σ of the per-image MSE.
  double compute_gradient(const int64_t* idx, int b, float* outputs);
  const std::vector<float>& gradient() const { return grad_; }

  // The per-image building blocks every pass above is made of: `pixels` into ws.x (the
  // same arithmetic as PyTorch's uint8 → float tensor / 255), then the whole forward pass
  // of ws.x, every activation and pool pick left in `ws`.
  void load_image(const uint8_t* pixels, Workspace& ws) const;
  void forward(Workspace& ws) const;

 private:
  const float* weight(int l) const { return params_.data() + arch_.conv(l).weight_offset; }
  const float* bias(int l) const { return params_.data() + arch_.conv(l).bias_offset; }
  const cpu::Conv3x3& conv(int l) const { return convs_[size_t(l)]; }             // l = 0..k
  const cpu::UpConv3x3& upconv(int l) const { return upconvs_[size_t(l - k_ - 1)]; }  // l = k+1..2k
  void load_weights();
  // The encoder blocks; the last one's pooled output goes to `latent`.
  void encode_image(Workspace& ws, float* latent) const;
  // Adds this image's parameter gradients to grad_work (each layer's working layout, at
  // work_offset_). ws.dout holds d(loss)/d(out).
  void backward(Workspace& ws, float* grad_work) const;
  // One optimizer step on images train_[idx[0..b)]. Returns Σ of their per-image MSE;
  // when that is not finite the weights are left unchanged.
  double train_step(const int64_t* idx, int b, float lr);
  void apply_gradient(float lr);

  Architecture arch_;
  int k_;  // encoder blocks
  OptimizerConfig opt_;
  int threads_;
  std::vector<float> params_;
  OptimizerState state_;
  std::vector<uint8_t> train_;
  std::vector<cpu::Conv3x3> convs_;      // layers 0..k: encoder conv1..k, decoder conv1
  std::vector<cpu::UpConv3x3> upconvs_;  // layers k+1..2k: decoder conv2..k+1 (each after an upsampling)
  std::vector<int64_t> work_offset_;     // each layer's slice of a gradient work buffer
  std::vector<Workspace> workspaces_;
  std::vector<std::vector<float>> grad_work_;  // per thread, each layer in its working layout
  std::vector<float> grad_;                    // summed gradient, PyTorch layout
};

}  // namespace ae
