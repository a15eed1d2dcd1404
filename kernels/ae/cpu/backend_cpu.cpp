// The CPU backend of the autoencoder (AeBackend in kernels/ae/backend.h) for any
// Architecture of the family (kernels/ae/model.h): the reference implementation every GPU
// kernel is checked against.
//
// How a training step runs: the batch is split into one contiguous block of images per
// thread, and each thread takes its images one at a time through the whole network —
// forward, loss, backward — using the per-image layer code (kernels/ae/cpu/conv2d.h etc.).
// The model has no batch-coupled layer (no batch norm), so an image's gradient depends on
// that image only, and one image's activations (~3 MB for the seed model) stay in the
// core's cache instead of streaming batch-sized tensors through memory. Each thread sums
// its images' weight gradients into its own buffer; the buffers are added in thread order,
// then clipped and applied. No atomics, no order that depends on timing: the same thread
// count gives bit-identical weights.
//
// Two fusions cut the work without changing the model: each "upsample → conv" pair of the
// decoder runs as four 2×2 phase convolutions on the low-resolution input (upconv.h, 4/9
// of the multiply-adds), and each "ReLU → maxpool" pair pools the pre-activation and
// applies the ReLU to the pooled values.
//
// Layer l of arch.convs(): encoder blocks l = 0..k−1 (conv, then pool+ReLU), decoder conv1
// l = k (conv+ReLU), decoder conv2..conv(k+1) l = k+1..2k (upsample+conv, ReLU except the
// last). Decoder layer j (l = k+j) outputs the shape of encoder block k−1−j's pooled
// output — the decoder mirrors the encoder — which lets the backward pass reuse one
// gradient buffer per level (Workspace::g).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/ae/cpu/backend_cpu.h"
#include "kernels/ae/cpu/layers.h"

namespace ae {

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

namespace {

int64_t output_size(const ConvLayer& l) { return int64_t(l.out) * l.H * l.W; }
int64_t pooled_size(const ConvLayer& l) { return int64_t(l.out) * (l.H / 2) * (l.W / 2); }

}  // namespace

CpuBackend::Workspace::Workspace(const Architecture& arch) {
  const int k = arch.depth();
  x.resize(size_t(arch.image_dim()));
  out.resize(x.size());
  dout.resize(x.size());
  dlatent.resize(size_t(arch.latent_dim()));
  for (int i = 0; i < k; ++i) {
    const ConvLayer& l = arch.conv(i);
    z.emplace_back(size_t(output_size(l)));
    dz.emplace_back(size_t(output_size(l)));
    p.emplace_back(size_t(pooled_size(l)));
    g.emplace_back(size_t(pooled_size(l)));
    arg.emplace_back(size_t(pooled_size(l)));
  }
  for (int j = 0; j < k; ++j) a.emplace_back(size_t(output_size(arch.conv(k + j))));
}

CpuBackend::CpuBackend(const Architecture& arch, const OptimizerConfig& opt, int threads)
    : arch_(arch), k_(arch.depth()), opt_(opt), threads_(threads > 0 ? threads : omp_get_max_threads()),
      params_(init_params(arch, 0)) {
  if (opt_.kind != "adam" && opt_.kind != "sgd") throw std::invalid_argument("unknown optimizer '" + opt_.kind + "'");
  cpu::prepare_blas();
  // Layers 0..k are plain convolutions; k+1..2k read the upsampled output of the layer
  // before them, so they run as UpConv3x3 on the half-size input.
  int64_t offset = 0;
  for (const ConvLayer& l : arch_.convs()) {
    work_offset_.push_back(offset);
    if (l.upsample) {
      upconvs_.emplace_back(l.in, l.out, l.H / 2, l.W / 2);
      offset += upconvs_.back().grad_work_size();
    } else {
      convs_.emplace_back(l.in, l.out, l.H, l.W);
      offset += convs_.back().grad_work_size();
    }
  }
  if (int(convs_.size()) != k_ + 1 || int(upconvs_.size()) != k_)
    throw std::logic_error("CpuBackend: unexpected layer sequence in " + arch_.describe());
  workspaces_.assign(size_t(threads_), Workspace(arch_));
  grad_work_.assign(size_t(threads_), std::vector<float>(size_t(offset)));
  grad_.assign(size_t(arch_.param_count()), 0.0f);
  load_weights();
}

std::string CpuBackend::describe() const {
  std::string blas = cpu::blas_kernel_name();
  return "cpu, " + std::to_string(threads_) + (threads_ == 1 ? " thread" : " threads") +
         (blas.empty() ? "" : ", OpenBLAS " + blas);
}

void CpuBackend::set_params(const std::vector<float>& params) {
  if (params.size() != size_t(arch_.param_count()))
    throw std::invalid_argument("set_params: expected " + std::to_string(arch_.param_count()) + " values, got " +
                                std::to_string(params.size()));
  params_ = params;
  load_weights();
}

void CpuBackend::set_optimizer_state(const OptimizerState& s) {
  for (const std::vector<float>* buf : {&s.m, &s.v})
    if (!buf->empty() && buf->size() != size_t(arch_.param_count()))
      throw std::invalid_argument("set_optimizer_state: moment buffers must have " +
                                  std::to_string(arch_.param_count()) + " values");
  state_ = s;
}

void CpuBackend::set_train_images(const uint8_t* images, int64_t n) {
  train_.assign(images, images + n * arch_.image_dim());
}

double CpuBackend::train_epoch(const std::vector<int64_t>& order, int batch, float lr, const StepCallback& on_progress) {
  if (batch <= 0) throw std::invalid_argument("train_epoch: batch size must be positive");
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t train_count = static_cast<int64_t>(train_.size()) / arch_.image_dim();
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

double CpuBackend::eval_loss(const uint8_t* images, int64_t n, int /*batch*/) {
  if (n <= 0) return 0.0;
  const int64_t dim = arch_.image_dim();
  std::vector<double> partial(threads_, 0.0);
#pragma omp parallel num_threads(threads_)
  {
    const int tid = omp_get_thread_num();
    Workspace& ws = workspaces_[tid];
    double sum = 0.0;
    const int64_t i0 = n * tid / threads_, i1 = n * (tid + 1) / threads_;
    for (int64_t i = i0; i < i1; ++i) {
      load_image(images + i * dim, ws);
      forward(ws);
      sum += cpu::squared_error(ws.out.data(), ws.x.data(), dim, nullptr, 0.0f) / dim;
    }
    partial[tid] = sum;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total / double(n);
}

void CpuBackend::reconstruct(const uint8_t* images, int64_t n, float* out) {
  const int64_t dim = arch_.image_dim();
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) {
    Workspace& ws = workspaces_[omp_get_thread_num()];
    load_image(images + i * dim, ws);
    forward(ws);
    std::copy(ws.out.begin(), ws.out.end(), out + i * dim);
  }
}

void CpuBackend::encode(const uint8_t* images, int64_t n, int /*batch*/, float* latent) {
  const int64_t dim = arch_.image_dim(), latent_dim = arch_.latent_dim();
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t i = 0; i < n; ++i) {
    Workspace& ws = workspaces_[omp_get_thread_num()];
    load_image(images + i * dim, ws);
    encode_image(ws, latent + i * latent_dim);
  }
}

void CpuBackend::load_weights() {
  for (int l = 0; l <= k_; ++l) convs_[size_t(l)].set_weights(weight(l));
  for (int l = k_ + 1; l <= 2 * k_; ++l) upconvs_[size_t(l - k_ - 1)].set_weights(weight(l));
}

void CpuBackend::load_image(const uint8_t* pixels, Workspace& ws) const {
  const int64_t dim = arch_.image_dim();
  for (int64_t i = 0; i < dim; ++i) ws.x[i] = static_cast<float>(pixels[i]) / 255.0f;
}

void CpuBackend::encode_image(Workspace& ws, float* latent) const {
  for (int i = 0; i < k_; ++i) {
    const ConvLayer& l = arch_.conv(i);
    conv(i).forward(i == 0 ? ws.x.data() : ws.p[i - 1].data(), bias(i), ws.z[i].data(), false);
    cpu::maxpool2_relu_forward(ws.z[i].data(), i == k_ - 1 ? latent : ws.p[i].data(), ws.arg[i].data(), 1, l.out,
                               l.H, l.W);
  }
}

void CpuBackend::forward(Workspace& ws) const {
  encode_image(ws, ws.p[k_ - 1].data());
  conv(k_).forward(ws.p[k_ - 1].data(), bias(k_), ws.a[0].data(), true);
  for (int j = 1; j <= k_; ++j) {  // upsample ×2, conv; the last one is the output, without ReLU
    const int l = k_ + j;
    upconv(l).forward(ws.a[j - 1].data(), bias(l), j == k_ ? ws.out.data() : ws.a[j].data(), arch_.conv(l).relu);
  }
}

void CpuBackend::backward(Workspace& ws, float* grad_work) const {
  auto gw = [&](int l) { return grad_work + work_offset_[size_t(l)]; };
  // Decoder, last layer first: d(a[j]) lands in g[k−1−j] (a[j]'s shape), through its ReLU.
  for (int j = k_; j >= 1; --j) {
    const int l = k_ + j;
    const float* dy = j == k_ ? ws.dout.data() : ws.g[k_ - 1 - j].data();
    float* da = ws.g[k_ - j].data();  // d(a[j−1])
    upconv(l).backward(ws.a[j - 1].data(), dy, da, gw(l));
    cpu::relu_backward(da, ws.a[j - 1].data(), da, int64_t(ws.a[j - 1].size()));
  }
  conv(k_).backward(ws.p[k_ - 1].data(), ws.g[k_ - 1].data(), ws.dlatent.data(), gw(k_));
  // Encoder, last block first: d(p[i]) is dlatent, then g[i] (the decoder is done with it).
  for (int i = k_ - 1; i >= 0; --i) {
    const ConvLayer& l = arch_.conv(i);
    const float* dp = i == k_ - 1 ? ws.dlatent.data() : ws.g[i].data();
    cpu::maxpool2_relu_backward(dp, ws.arg[i].data(), ws.p[i].data(), ws.dz[i].data(), 1, l.out, l.H, l.W);
    conv(i).backward(i == 0 ? ws.x.data() : ws.p[i - 1].data(), ws.dz[i].data(),
                     i == 0 ? nullptr : ws.g[i - 1].data(), gw(i));  // the input needs no gradient
  }
}

double CpuBackend::train_step(const int64_t* idx, int b, float lr) {
  const double loss_sum = compute_gradient(idx, b, nullptr);
  if (std::isfinite(loss_sum)) apply_gradient(lr);
  return loss_sum;
}

double CpuBackend::compute_gradient(const int64_t* idx, int b, float* outputs) {
  const int64_t dim = arch_.image_dim();
  std::vector<double> partial(threads_, 0.0);
  const float grad_scale = static_cast<float>(2.0 / (double(b) * dim));  // d(batch mean)/d(out)
#pragma omp parallel num_threads(threads_)
  {
    const int tid = omp_get_thread_num();
    Workspace& ws = workspaces_[tid];
    std::vector<float>& work = grad_work_[tid];
    std::fill(work.begin(), work.end(), 0.0f);
    double sum = 0.0;
    const int i0 = static_cast<int>(int64_t(b) * tid / threads_), i1 = static_cast<int>(int64_t(b) * (tid + 1) / threads_);
    for (int i = i0; i < i1; ++i) {
      load_image(train_.data() + idx[i] * dim, ws);
      forward(ws);
      sum += cpu::squared_error(ws.out.data(), ws.x.data(), dim, ws.dout.data(), grad_scale) / dim;
      if (outputs) std::copy(ws.out.begin(), ws.out.end(), outputs + int64_t(i) * dim);
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
  for (int l = 0; l < arch_.num_convs(); ++l) {
    const float* work = grad_work_[0].data() + work_offset_[size_t(l)];
    float* dw = grad_.data() + arch_.conv(l).weight_offset;
    float* db = grad_.data() + arch_.conv(l).bias_offset;
    if (arch_.conv(l).upsample)
      upconv(l).finish_weight_grad(work, dw, db, false);
    else
      conv(l).finish_weight_grad(work, dw, db, false);
  }
  return loss_sum;
}

void CpuBackend::apply_gradient(float lr) {
  const int64_t count = arch_.param_count();
  if (opt_.grad_clip > 0.0f) cpu::clip_grad_norm(grad_.data(), count, opt_.grad_clip);
  ++state_.step;
  if (opt_.kind == "adam") {
    if (state_.m.empty()) state_.m.assign(size_t(count), 0.0f);
    if (state_.v.empty()) state_.v.assign(size_t(count), 0.0f);
    cpu::adam_step(params_.data(), grad_.data(), state_.m.data(), state_.v.data(), count, state_.step, lr,
                   opt_.beta1, opt_.beta2, opt_.eps, opt_.weight_decay);
  } else {
    if (opt_.momentum != 0.0f && state_.m.empty()) state_.m.assign(size_t(count), 0.0f);
    cpu::sgd_step(params_.data(), grad_.data(), state_.m.empty() ? nullptr : state_.m.data(), count, lr,
                  opt_.momentum, opt_.weight_decay);
  }
  load_weights();
}

std::unique_ptr<AeBackend> make_cpu_backend(const Architecture& arch, const OptimizerConfig& opt, int threads) {
  return std::make_unique<CpuBackend>(arch, opt, threads);
}

}  // namespace ae
