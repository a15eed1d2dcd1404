// The CPU backend of the autoencoder (AeBackend in kernels/ae/model.h): the reference
// implementation every GPU kernel is checked against.
//
// How a training step runs: the batch is split into one contiguous block of images per
// thread, and each thread takes its images one at a time through the whole network —
// forward, loss, backward — using the per-image layer code (kernels/ae/cpu/conv2d.h etc.).
// The model has no batch-coupled layer (no batch norm), so an image's gradient depends on
// that image only, and one image's activations (~3 MB) stay in the core's cache instead of
// streaming batch-sized tensors through memory. Each thread sums its images' weight
// gradients into its own buffer; the buffers are added in thread order, then clipped and
// applied. No atomics, no order that depends on timing: the same thread count gives
// bit-identical weights.
//
// Two fusions cut the work without changing the model: each "upsample → conv" pair of the
// decoder runs as four 2×2 phase convolutions on the low-resolution input (upconv.h, 4/9
// of the multiply-adds), and each "ReLU → maxpool" pair pools the pre-activation and
// applies the ReLU to the pooled values.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "kernels/ae/model.h"
#include "kernels/ae/cpu/backend_cpu.h"
#include "kernels/ae/cpu/conv2d.h"
#include "kernels/ae/cpu/upconv.h"
#include "kernels/ae/cpu/layers.h"

namespace ae {

std::vector<float> init_params(uint64_t seed) {
  // Box–Muller on std::mt19937_64's raw output (fully specified by the standard), rather
  // than std::normal_distribution, whose algorithm differs between standard libraries.
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] { return (double(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0,1)
  std::vector<float> params(kParamCount, 0.0f);
  for (int l = 0; l < kNumConvs; ++l) {
    const double std_dev = std::sqrt(2.0 / (kConvs[l].in * 9.0));
    float* w = params.data() + weight_offset(l);
    for (int64_t i = 0; i < weight_count(l); i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform())), theta = 2.0 * M_PI * uniform();
      w[i] = static_cast<float>(std_dev * r * std::cos(theta));
      if (i + 1 < weight_count(l)) w[i + 1] = static_cast<float>(std_dev * r * std::sin(theta));
    }
    // biases stay zero
  }
  return params;
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

namespace {

using cpu::Conv3x3;
using cpu::UpConv3x3;

// One image's activations and gradients (sizes per image, C×H×W).
struct Workspace {
  std::vector<float> x = std::vector<float>(kImageDim);              // input, pixels/255
  std::vector<float> z1 = std::vector<float>(256 * 32 * 32);         // encoder conv1, before ReLU
  std::vector<float> p1 = std::vector<float>(256 * 16 * 16);         // relu(maxpool(z1))
  std::vector<float> z2 = std::vector<float>(128 * 16 * 16);         // encoder conv2, before ReLU
  std::vector<float> latent = std::vector<float>(kLatentDim);        // relu(maxpool(z2)), 128×8×8
  std::vector<float> a3 = std::vector<float>(128 * 8 * 8);           // decoder conv1 + ReLU
  std::vector<float> a4 = std::vector<float>(256 * 16 * 16);         // decoder conv2 (on upsampled a3) + ReLU
  std::vector<float> out = std::vector<float>(kImageDim);            // decoder conv3 (on upsampled a4)
  std::vector<int32_t> arg1 = std::vector<int32_t>(256 * 16 * 16), arg2 = std::vector<int32_t>(kLatentDim);
  // Gradients; buffers whose lifetimes do not overlap are shared (see backward()).
  std::vector<float> dout = std::vector<float>(kImageDim);
  std::vector<float> g_256x16 = std::vector<float>(256 * 16 * 16);  // da4, later dp1
  std::vector<float> da3 = std::vector<float>(128 * 8 * 8), dlatent = std::vector<float>(kLatentDim);
  std::vector<float> dz2 = std::vector<float>(128 * 16 * 16);
  std::vector<float> dz1 = std::vector<float>(256 * 32 * 32);
};

class CpuBackend final : public AeBackend {
 public:
  CpuBackend(const OptimizerConfig& opt, int threads)
      : opt_(opt), threads_(threads > 0 ? threads : omp_get_max_threads()), params_(init_params(0)) {
    if (opt_.kind != "adam" && opt_.kind != "sgd") throw std::invalid_argument("unknown optimizer '" + opt_.kind + "'");
    cpu::prepare_blas();
    // Layers 0-2 are plain convolutions; 3 and 4 read the upsampled output of the layer
    // before them, so they run as UpConv3x3 on the half-size input.
    for (int l = 0; l < 3; ++l) convs_.emplace_back(kConvs[l].in, kConvs[l].out, kConvs[l].size, kConvs[l].size);
    for (int l = 3; l < kNumConvs; ++l)
      upconvs_.emplace_back(kConvs[l].in, kConvs[l].out, kConvs[l].size / 2, kConvs[l].size / 2);
    int64_t offset = 0;
    for (int l = 0; l < kNumConvs; ++l) {
      work_offset_[l] = offset;
      offset += l < 3 ? convs_[l].grad_work_size() : upconvs_[l - 3].grad_work_size();
    }
    workspaces_.resize(threads_);
    grad_work_.assign(threads_, std::vector<float>(offset));
    grad_.assign(kParamCount, 0.0f);
    load_weights();
  }

  std::string describe() const override {
    std::string blas = cpu::blas_kernel_name();
    return "cpu, " + std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") +
           (blas.empty() ? "" : ", OpenBLAS " + blas);
  }

  void set_params(const std::vector<float>& params) override {
    if (params.size() != static_cast<size_t>(kParamCount))
      throw std::invalid_argument("set_params: expected " + std::to_string(kParamCount) + " values, got " +
                                  std::to_string(params.size()));
    params_ = params;
    load_weights();
  }
  std::vector<float> params() const override { return params_; }

  void set_optimizer_state(const OptimizerState& s) override {
    for (const std::vector<float>* buf : {&s.m, &s.v})
      if (!buf->empty() && buf->size() != static_cast<size_t>(kParamCount))
        throw std::invalid_argument("set_optimizer_state: moment buffers must have " + std::to_string(kParamCount) +
                                    " values");
    state_ = s;
  }
  OptimizerState optimizer_state() const override { return state_; }

  void set_train_images(const uint8_t* images, int64_t n) override {
    train_.assign(images, images + n * kImageDim);
  }

  double train_epoch(const std::vector<int64_t>& order, int batch, float lr, const StepCallback& on_progress) override {
    if (batch <= 0) throw std::invalid_argument("train_epoch: batch size must be positive");
    const int64_t n = static_cast<int64_t>(order.size()), train_count = static_cast<int64_t>(train_.size()) / kImageDim;
    for (int64_t idx : order)
      if (idx < 0 || idx >= train_count) throw std::out_of_range("train_epoch: image index out of range");
    double loss_sum = 0.0;  // Σ over images of the per-image MSE
    for (int64_t start = 0; start < n; start += batch) {
      const int b = static_cast<int>(std::min<int64_t>(batch, n - start));
      const double batch_loss_sum = train_step(order.data() + start, b, lr);
      if (!std::isfinite(batch_loss_sum)) return batch_loss_sum;  // weights left as before this step
      loss_sum += batch_loss_sum;
      if (on_progress) on_progress(start + b, loss_sum / double(start + b));
    }
    return n > 0 ? loss_sum / double(n) : 0.0;
  }

  double eval_loss(const uint8_t* images, int64_t n, int /*batch*/) override {
    if (n <= 0) return 0.0;
    std::vector<double> partial(threads_, 0.0);
#pragma omp parallel num_threads(threads_)
    {
      const int tid = omp_get_thread_num();
      Workspace& ws = workspaces_[tid];
      double sum = 0.0;
      const int64_t i0 = n * tid / threads_, i1 = n * (tid + 1) / threads_;
      for (int64_t i = i0; i < i1; ++i) {
        load_image(images + i * kImageDim, ws);
        forward(ws);
        sum += cpu::squared_error(ws.out.data(), ws.x.data(), kImageDim, nullptr, 0.0f) / kImageDim;
      }
      partial[tid] = sum;
    }
    double total = 0.0;
    for (double p : partial) total += p;
    return total / double(n);
  }

  void reconstruct(const uint8_t* images, int64_t n, float* out) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      Workspace& ws = workspaces_[omp_get_thread_num()];
      load_image(images + i * kImageDim, ws);
      forward(ws);
      std::copy(ws.out.begin(), ws.out.end(), out + i * kImageDim);
    }
  }

  void encode(const uint8_t* images, int64_t n, int /*batch*/, float* latent) override {
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t i = 0; i < n; ++i) {
      Workspace& ws = workspaces_[omp_get_thread_num()];
      load_image(images + i * kImageDim, ws);
      encode_image(ws, latent + i * kLatentDim);
    }
  }

 private:
  const float* weight(int l) const { return params_.data() + weight_offset(l); }
  const float* bias(int l) const { return params_.data() + bias_offset(l); }
  void load_weights() {
    for (int l = 0; l < 3; ++l) convs_[l].set_weights(weight(l));
    for (int l = 3; l < kNumConvs; ++l) upconvs_[l - 3].set_weights(weight(l));
  }

  // Same arithmetic as PyTorch's uint8 → float tensor / 255.
  static void load_image(const uint8_t* pixels, Workspace& ws) {
    for (int i = 0; i < kImageDim; ++i) ws.x[i] = static_cast<float>(pixels[i]) / 255.0f;
  }

  void encode_image(Workspace& ws, float* latent) const {
    convs_[0].forward(ws.x.data(), bias(0), ws.z1.data(), false);
    cpu::maxpool2_relu_forward(ws.z1.data(), ws.p1.data(), ws.arg1.data(), 1, 256, 32, 32);
    convs_[1].forward(ws.p1.data(), bias(1), ws.z2.data(), false);
    cpu::maxpool2_relu_forward(ws.z2.data(), latent, ws.arg2.data(), 1, 128, 16, 16);
  }

  void forward(Workspace& ws) const {
    encode_image(ws, ws.latent.data());
    convs_[2].forward(ws.latent.data(), bias(2), ws.a3.data(), true);
    upconvs_[0].forward(ws.a3.data(), bias(3), ws.a4.data(), true);    // upsample 8→16, conv 128→256
    upconvs_[1].forward(ws.a4.data(), bias(4), ws.out.data(), false);  // upsample 16→32, conv 256→3
  }

  static void record_decisions(const Workspace& ws, int i, ForwardDecisions& d) {
    auto put = [i](const auto& from, auto& to) { std::copy(from.begin(), from.end(), to.begin() + int64_t(i) * from.size()); };
    put(ws.arg1, d.pool1_argmax);
    put(ws.p1, d.pool1);
    put(ws.arg2, d.pool2_argmax);
    put(ws.latent, d.pool2);
    put(ws.a3, d.dconv1);
    put(ws.a4, d.dconv2);
  }

  // Adds this image's parameter gradients to grad_work (each layer's working layout, at
  // work_offset_). ws.dout holds d(loss)/d(out).
  void backward(Workspace& ws, float* grad_work) const {
    float* gw[kNumConvs];
    for (int l = 0; l < kNumConvs; ++l) gw[l] = grad_work + work_offset_[l];
    float* da4 = ws.g_256x16.data();
    upconvs_[1].backward(ws.a4.data(), ws.dout.data(), da4, gw[4]);
    cpu::relu_backward(da4, ws.a4.data(), da4, 256 * 16 * 16);
    upconvs_[0].backward(ws.a3.data(), da4, ws.da3.data(), gw[3]);
    cpu::relu_backward(ws.da3.data(), ws.a3.data(), ws.da3.data(), 128 * 8 * 8);
    convs_[2].backward(ws.latent.data(), ws.da3.data(), ws.dlatent.data(), gw[2]);
    cpu::maxpool2_relu_backward(ws.dlatent.data(), ws.arg2.data(), ws.latent.data(), ws.dz2.data(), 1, 128, 16, 16);
    float* dp1 = ws.g_256x16.data();  // da4 is no longer needed
    convs_[1].backward(ws.p1.data(), ws.dz2.data(), dp1, gw[1]);
    cpu::maxpool2_relu_backward(dp1, ws.arg1.data(), ws.p1.data(), ws.dz1.data(), 1, 256, 32, 32);
    convs_[0].backward(ws.x.data(), ws.dz1.data(), nullptr, gw[0]);  // the input needs no gradient
  }

  // One optimizer step on images train_[idx[0..b)]. Returns Σ of their per-image MSE;
  // when that is not finite the weights are left unchanged.
  double train_step(const int64_t* idx, int b, float lr) {
    const double loss_sum = compute_gradient(idx, b, nullptr);
    if (std::isfinite(loss_sum)) apply_gradient(lr);
    return loss_sum;
  }

 public:
  // Forward and backward over images train_[idx[0..b)] without a step: grad_ receives the
  // gradient of the batch-mean MSE (PyTorch layout), `outputs` (when not null) the
  // decoder outputs [b,3,32,32]. Returns Σ of the per-image MSE.
  double compute_gradient(const int64_t* idx, int b, float* outputs, ForwardDecisions* decisions = nullptr) {
    if (decisions) {
      decisions->pool1_argmax.resize(size_t(b) * 256 * 16 * 16);
      decisions->pool1.resize(size_t(b) * 256 * 16 * 16);
      decisions->pool2_argmax.resize(size_t(b) * kLatentDim);
      decisions->pool2.resize(size_t(b) * kLatentDim);
      decisions->dconv1.resize(size_t(b) * 128 * 8 * 8);
      decisions->dconv2.resize(size_t(b) * 256 * 16 * 16);
    }
    std::vector<double> partial(threads_, 0.0);
    const float grad_scale = static_cast<float>(2.0 / (double(b) * kImageDim));  // d(batch mean)/d(out)
#pragma omp parallel num_threads(threads_)
    {
      const int tid = omp_get_thread_num();
      Workspace& ws = workspaces_[tid];
      std::vector<float>& work = grad_work_[tid];
      std::fill(work.begin(), work.end(), 0.0f);
      double sum = 0.0;
      const int i0 = static_cast<int>(int64_t(b) * tid / threads_), i1 = static_cast<int>(int64_t(b) * (tid + 1) / threads_);
      for (int i = i0; i < i1; ++i) {
        load_image(train_.data() + idx[i] * kImageDim, ws);
        forward(ws);
        sum += cpu::squared_error(ws.out.data(), ws.x.data(), kImageDim, ws.dout.data(), grad_scale) / kImageDim;
        if (outputs) std::copy(ws.out.begin(), ws.out.end(), outputs + int64_t(i) * kImageDim);
        if (decisions) record_decisions(ws, i, *decisions);
        backward(ws, work.data());
      }
      partial[tid] = sum;
    }
    double loss_sum = 0.0;
    for (double p : partial) loss_sum += p;
    if (!std::isfinite(loss_sum)) return loss_sum;

    // Thread buffers summed in thread order (element-wise, so splitting it is safe).
    const int64_t work_size = static_cast<int64_t>(grad_work_[0].size());
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t i = 0; i < work_size; ++i) {
      float s = grad_work_[0][i];
      for (int t = 1; t < threads_; ++t) s += grad_work_[t][i];
      grad_work_[0][i] = s;
    }
    for (int l = 0; l < kNumConvs; ++l) {
      const float* work = grad_work_[0].data() + work_offset_[l];
      float* dw = grad_.data() + weight_offset(l);
      float* db = grad_.data() + bias_offset(l);
      if (l < 3)
        convs_[l].finish_weight_grad(work, dw, db, false);
      else
        upconvs_[l - 3].finish_weight_grad(work, dw, db, false);
    }
    return loss_sum;
  }
  const std::vector<float>& gradient() const { return grad_; }

 private:
  void apply_gradient(float lr) {
    if (opt_.grad_clip > 0.0f) cpu::clip_grad_norm(grad_.data(), kParamCount, opt_.grad_clip);
    ++state_.step;
    if (opt_.kind == "adam") {
      if (state_.m.empty()) state_.m.assign(kParamCount, 0.0f);
      if (state_.v.empty()) state_.v.assign(kParamCount, 0.0f);
      cpu::adam_step(params_.data(), grad_.data(), state_.m.data(), state_.v.data(), kParamCount, state_.step, lr,
                     opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay);
    } else {
      if (opt_.momentum != 0.0f && state_.m.empty()) state_.m.assign(kParamCount, 0.0f);
      cpu::sgd_step(params_.data(), grad_.data(), state_.m.empty() ? nullptr : state_.m.data(), kParamCount, lr,
                    opt_.momentum, opt_.weight_decay);
    }
    load_weights();
  }

  OptimizerConfig opt_;
  int threads_;
  std::vector<float> params_;
  OptimizerState state_;
  std::vector<uint8_t> train_;
  std::vector<Conv3x3> convs_;      // encoder conv1, conv2, decoder conv1
  std::vector<UpConv3x3> upconvs_;  // decoder conv2, conv3 (each after an upsampling)
  int64_t work_offset_[kNumConvs];   // each layer's slice of a gradient work buffer
  std::vector<Workspace> workspaces_;
  std::vector<std::vector<float>> grad_work_;  // per thread, each layer in its working layout
  std::vector<float> grad_;                    // summed gradient, PyTorch layout
};

}  // namespace

std::unique_ptr<AeBackend> make_cpu_backend(const OptimizerConfig& opt, int threads) {
  return std::make_unique<CpuBackend>(opt, threads);
}

double cpu_loss_and_gradient(const std::vector<float>& params, const uint8_t* images, int n, int threads,
                             float* outputs, float* grad, ForwardDecisions* decisions) {
  CpuBackend backend(OptimizerConfig{}, threads);
  backend.set_params(params);
  backend.set_train_images(images, n);
  std::vector<int64_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  const double loss_sum = backend.compute_gradient(order.data(), n, outputs, decisions);
  std::copy(backend.gradient().begin(), backend.gradient().end(), grad);
  return loss_sum / n;
}

}  // namespace ae
