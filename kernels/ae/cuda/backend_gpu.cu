// The GPU backend of the autoencoder (AeBackend on CUDA). See docs/GPU.md.
//
// One training step is ~25 kernels, captured once per batch size into a CUDA graph (the
// weight gradients on a side branch beside the input gradients) and replayed: no
// allocation, no host synchronisation, no per-kernel launch cost. The training images stay on the GPU as uint8; the first kernel gathers the
// step's images through the shuffled order (read on the device at *pos) and normalises
// them. Activations are NHWC in bf16 or fp32; the master weights, the gradient and the
// optimizer state are fp32, and the optimizer kernel also refreshes the packed (and, in
// bf16 mode, rounded) weight copies the convolutions read.
#include <cuda_profiler_api.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ae/model.h"
#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/layers_cuda.cuh"

namespace ae {
namespace {

using namespace ae::cuda;

constexpr int kEncodeChunk = 1024;  // images per encoder launch (results do not depend on it)
constexpr int kProgressEvery = 50;  // steps between loss read-backs when a callback is set

// Activation pitches (channels, padded to a power of two ≥ 8).
constexpr int kOutPitch = 8;   // the 3-channel reconstruction gradient
constexpr int kFoldPitch = 32; // that gradient folded onto the 16×16 grid: 9 taps × 3 channels

// Which stream of the captured graph a stage runs on. The weight gradients form side
// branches: each one needs only what the forward pass and the previous input gradient wrote,
// and nothing on the main chain reads what it writes, so the graph lets it run beside the
// next input-gradient kernel instead of after it.
enum class Lane { main, side, join };

struct Stage {
  std::string name;
  double flops;  // useful floating-point operations (padding not counted)
  std::function<void(cudaStream_t)> run;
  Lane lane = Lane::main;  // side: forks from everything issued on main so far;
                           // join: main first waits for every side branch
  int branch = 0;          // side: which side stream (kSideBranches of them)
};

// The weight gradients run on two side branches of the step graph, each with its own
// workspaces: the two large ones (decoder conv2, encoder conv2) on one, the three small
// ones on the other (docs/GPU.md). AE_GRAPH_SIDE_BRANCHES=1 puts all five on one branch,
// as before, to compare.
constexpr int kSideBranches = 2;
int side_branches() {
  static const int v = [] {
    const char* e = std::getenv("AE_GRAPH_SIDE_BRANCHES");
    return e && std::atoi(e) == 1 ? 1 : 2;
  }();
  return v;
}
int side_branch_of(int layer) { return side_branches() == 2 && (layer == 3 || layer == 1) ? 1 : 0; }

// AE_EXPLICIT_UNPOOL=1 writes the first encoder layer's unpooled gradient (32², 256) out
// and reads it back in its weight gradient, as before the unpooled operand (to measure
// what that buys; docs/GPU.md).
bool explicit_unpool() {
  static const bool v = std::getenv("AE_EXPLICIT_UNPOOL") != nullptr;
  return v;
}

double conv_flops(int layer, int images) {
  const ConvSpec& c = kConvs[layer];
  return 2.0 * images * c.size * c.size * c.in * c.out * 9;
}

class PinnedBuffer {
 public:
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  void resize(size_t bytes) {
    if (bytes <= bytes_) return;
    if (ptr_) cudaFreeHost(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
    AE_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault));
    bytes_ = bytes;
  }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class GpuBackend final : public AeBackend {
 public:
  GpuBackend(const OptimizerConfig& opt, Precision precision)
      : opt_(opt), precision_(precision), dt_(precision == Precision::bf16 ? DType::bf16 : DType::f32) {
    if (opt_.kind != "adam" && opt_.kind != "sgd") throw std::invalid_argument("unknown optimizer '" + opt_.kind + "'");
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw std::runtime_error("--device gpu: no CUDA GPU found");
    cudaDeviceProp prop;
    AE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    gpu_name_ = prop.name;
    if (prop.major < 8)
      throw std::runtime_error(std::string("--device gpu: ") + prop.name + " is too old (needs compute capability 8.0+)");
    init_kernels();
    AE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (int b = 0; b < kSideBranches; ++b) {
      AE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_streams_[b], cudaStreamNonBlocking));
      AE_CUDA_CHECK(cudaEventCreateWithFlags(&join_events_[b], cudaEventDisableTiming));
    }
    for (auto& e : events_) AE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

    params_.resize(kParamCount);
    grad_.resize(kParamCount);
    m_.resize(kParamCount);
    v_.resize(kParamCount);
    AE_CUDA_CHECK(cudaMemsetAsync(params_.get(), 0, params_.bytes(), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(grad_.get(), 0, grad_.bytes(), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(m_.get(), 0, m_.bytes(), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(v_.get(), 0, v_.bytes(), stream_));
    pos_.resize(1);
    step_.resize(1);
    lr_.resize(1);
    loss_.resize(1);
    gsq_.resize(1);
    AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(step_.get(), 0, sizeof(int64_t), stream_));
    set_lr(opt_.lr);
    allocate_packed_weights();
    set_params(init_params(0));  // as the CPU backend starts
  }

  ~GpuBackend() override {
    drop_graphs();
    for (auto& e : events_)
      if (e) cudaEventDestroy(e);
    for (auto& e : fork_events_) cudaEventDestroy(e);
    for (int b = 0; b < kSideBranches; ++b) {
      if (join_events_[b]) cudaEventDestroy(join_events_[b]);
      if (side_streams_[b]) cudaStreamDestroy(side_streams_[b]);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string describe() const override {
    return gpu_name_ + ", " + precision_name(precision_) + " (implicit GEMM, mma.sync " +
           (precision_ == Precision::bf16 ? "bf16" : "tf32") + ")";
  }

  void set_params(const std::vector<float>& p) override {
    if (int64_t(p.size()) != kParamCount) throw std::invalid_argument("set_params: expected 751875 values");
    AE_CUDA_CHECK(cudaMemcpyAsync(params_.get(), p.data(), params_.bytes(), cudaMemcpyHostToDevice, stream_));
    pack_weights(params_.get(), packs_, dt_, stream_);
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  std::vector<float> params() const override {
    std::vector<float> p(kParamCount);
    AE_CUDA_CHECK(cudaMemcpyAsync(p.data(), params_.get(), params_.bytes(), cudaMemcpyDeviceToHost, stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return p;
  }

  void set_optimizer_state(const OptimizerState& s) override {
    auto upload = [&](const std::vector<float>& src, DeviceBuffer<float>& dst, const char* what) {
      if (src.empty()) {
        AE_CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, dst.bytes(), stream_));
      } else {
        if (int64_t(src.size()) != kParamCount)
          throw std::invalid_argument(std::string("optimizer state: ") + what + " must have 751875 values");
        AE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.data(), dst.bytes(), cudaMemcpyHostToDevice, stream_));
      }
    };
    upload(s.m, m_, "m");
    upload(s.v, v_, "v");
    AE_CUDA_CHECK(cudaMemcpyAsync(step_.get(), &s.step, sizeof(int64_t), cudaMemcpyHostToDevice, stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  OptimizerState optimizer_state() const override {
    OptimizerState s;
    AE_CUDA_CHECK(cudaMemcpyAsync(&s.step, step_.get(), sizeof(int64_t), cudaMemcpyDeviceToHost, stream_));
    const bool has_m = opt_.kind == "adam" || opt_.momentum != 0.f, has_v = opt_.kind == "adam";
    if (has_m) {
      s.m.resize(kParamCount);
      AE_CUDA_CHECK(cudaMemcpyAsync(s.m.data(), m_.get(), m_.bytes(), cudaMemcpyDeviceToHost, stream_));
    }
    if (has_v) {
      s.v.resize(kParamCount);
      AE_CUDA_CHECK(cudaMemcpyAsync(s.v.data(), v_.get(), v_.bytes(), cudaMemcpyDeviceToHost, stream_));
    }
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return s;
  }

  void set_train_images(const uint8_t* images, int64_t n) override {
    if (n <= 0) throw std::invalid_argument("set_train_images: no images");
    if (n > (int64_t(1) << 31) / 2) throw std::invalid_argument("set_train_images: too many images");
    drop_graphs();
    train_images_.release();
    train_images_.resize(size_t(n) * kImageDim);
    AE_CUDA_CHECK(cudaMemcpy(train_images_.get(), images, train_images_.bytes(), cudaMemcpyHostToDevice));
    n_train_ = n;
  }

  double train_epoch(const std::vector<int64_t>& order, int batch, float lr, const StepCallback& on_progress) override {
    if (n_train_ == 0) throw std::logic_error("train_epoch: set_train_images() first");
    if (batch <= 0) throw std::invalid_argument("train_epoch: batch must be positive");
    const int64_t n = int64_t(order.size());
    if (n == 0) return 0.0;
    upload_order(order);
    ensure_capacity(batch);
    set_lr(lr);
    AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(loss_.get(), 0, sizeof(double), stream_));

    const int64_t full = n / batch;
    const int rest = int(n % batch);
    // Every graph this epoch needs exists before the first step runs.
    cudaGraphExec_t g_full = full > 0 ? graph_for(batch) : nullptr;
    cudaGraphExec_t g_rest = rest > 0 ? graph_for(rest) : nullptr;
    for (int64_t s = 0; s < full; ++s) {
      AE_CUDA_CHECK(cudaGraphLaunch(g_full, stream_));
      if (on_progress && (s + 1) % kProgressEvery == 0) {
        const int64_t done = (s + 1) * batch;
        on_progress(done, read_loss() / (double(done) * kImageDim));
      }
    }
    if (g_rest) AE_CUDA_CHECK(cudaGraphLaunch(g_rest, stream_));
    const double mean = read_loss() / (double(n) * kImageDim);
    if (on_progress) on_progress(n, mean);
    return mean;
  }

  double eval_loss(const uint8_t* images, int64_t n, int batch) override {
    if (n <= 0) return 0.0;
    const int chunk = int(std::min<int64_t>(n, std::max(batch, 256)));
    ensure_capacity(chunk);
    stage_.resize(size_t(chunk) * kImageDim);
    AE_CUDA_CHECK(cudaMemsetAsync(loss_.get(), 0, sizeof(double), stream_));
    for (int64_t off = 0; off < n; off += chunk) {
      const int b = int(std::min<int64_t>(chunk, n - off));
      AE_CUDA_CHECK(cudaMemcpyAsync(stage_.get(), images + off * kImageDim, size_t(b) * kImageDim,
                                    cudaMemcpyHostToDevice, stream_));
      im2col_rgb(stage_.get(), nullptr, nullptr, b, col1_, dt_, stream_);
      forward_encoder(b, nullptr, stream_);
      forward_decoder(b, stage_.get(), nullptr, nullptr, /*with_grad=*/false, nullptr, stream_);
    }
    return read_loss() / (double(n) * kImageDim);
  }

  void reconstruct(const uint8_t* images, int64_t n, float* out) override {
    if (n <= 0) return;
    const int chunk = int(std::min<int64_t>(n, 256));
    ensure_capacity(chunk);
    stage_.resize(size_t(chunk) * kImageDim);
    recon_.resize(size_t(chunk) * kImageDim);
    for (int64_t off = 0; off < n; off += chunk) {
      const int b = int(std::min<int64_t>(chunk, n - off));
      AE_CUDA_CHECK(cudaMemcpyAsync(stage_.get(), images + off * kImageDim, size_t(b) * kImageDim,
                                    cudaMemcpyHostToDevice, stream_));
      im2col_rgb(stage_.get(), nullptr, nullptr, b, col1_, dt_, stream_);
      forward_encoder(b, nullptr, stream_);
      forward_decoder(b, stage_.get(), nullptr, nullptr, false, recon_.get(), stream_);
      AE_CUDA_CHECK(cudaMemcpyAsync(out + off * kImageDim, recon_.get(), sizeof(float) * b * kImageDim,
                                    cudaMemcpyDeviceToHost, stream_));
    }
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Chunks of images go up, through the encoder, and come back through two pinned
  // buffers: while the GPU encodes chunk c, the host copies chunk c−1 into `latent`.
  void encode(const uint8_t* images, int64_t n, int batch, float* latent) override {
    if (n <= 0) return;
    const int chunk = int(std::min<int64_t>(n, std::max(batch, kEncodeChunk)));
    ensure_capacity(chunk);
    stage_.resize(size_t(chunk) * kImageDim);
    latent_dev_.resize(2 * size_t(chunk) * kLatentDim);
    const size_t chunk_bytes = sizeof(float) * size_t(chunk) * kLatentDim;
    pinned_[0].resize(chunk_bytes);
    pinned_[1].resize(chunk_bytes);
    int64_t pending_off = -1;
    int pending_n = 0, pending_slot = 0;
    auto drain = [&]() {
      if (pending_off < 0) return;
      AE_CUDA_CHECK(cudaEventSynchronize(events_[pending_slot]));
      parallel_copy(latent + pending_off * kLatentDim, static_cast<const float*>(pinned_[pending_slot].get()),
                    size_t(pending_n) * kLatentDim);
      pending_off = -1;
    };
    int slot = 0;
    for (int64_t off = 0; off < n; off += chunk, slot ^= 1) {
      const int b = int(std::min<int64_t>(chunk, n - off));
      float* lat = latent_dev_.get() + size_t(slot) * chunk * kLatentDim;
      AE_CUDA_CHECK(cudaMemcpyAsync(stage_.get(), images + off * kImageDim, size_t(b) * kImageDim,
                                    cudaMemcpyHostToDevice, stream_));
      im2col_rgb(stage_.get(), nullptr, nullptr, b, col1_, dt_, stream_);
      forward_encoder(b, lat, stream_);
      AE_CUDA_CHECK(cudaMemcpyAsync(pinned_[slot].get(), lat, sizeof(float) * size_t(b) * kLatentDim,
                                    cudaMemcpyDeviceToHost, stream_));
      AE_CUDA_CHECK(cudaEventRecord(events_[slot], stream_));
      drain();  // the previous chunk, while this one runs
      pending_off = off;
      pending_n = b;
      pending_slot = slot;
    }
    drain();
  }

  // ---- for profile_training_step() ----
  std::string profile(int batch, int repeats) {
    if (n_train_ == 0) throw std::logic_error("profile: set_train_images() first");
    if (n_train_ < batch) throw std::invalid_argument("profile: fewer training images than the batch");
    std::vector<int64_t> order(static_cast<size_t>(batch));
    for (int i = 0; i < batch; ++i) order[size_t(i)] = i;
    upload_order(order);
    ensure_capacity(batch);
    std::vector<Stage> stages = step_stages(batch);
    cudaEvent_t t0, t1;
    AE_CUDA_CHECK(cudaEventCreate(&t0));
    AE_CUDA_CHECK(cudaEventCreate(&t1));
    auto reset = [&] { AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_)); };
    reset();
    for (auto& s : stages) s.run(stream_);  // warm-up
    reset();
    if (const char* only = std::getenv("AE_PROFILE_STAGE")) {
      // For Nsight Compute (ncu --profile-from-start off): the stages whose names start with
      // AE_PROFILE_STAGE, once, alone.
      AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      AE_CUDA_CHECK(cudaProfilerStart());
      for (auto& s : stages)
        if (s.name.rfind(only, 0) == 0) s.run(stream_);  // names starting with it
      AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      AE_CUDA_CHECK(cudaProfilerStop());
      cudaEventDestroy(t0);
      cudaEventDestroy(t1);
      return std::string("profiled stages matching '") + only + "' for Nsight Compute\n";
    }
    std::ostringstream out;
    char line[160];
    out << "per-kernel times, " << describe() << ", batch " << batch << ", median of " << repeats << " runs\n";
    std::snprintf(line, sizeof line, "  %-26s %9s %9s %9s\n", "stage", "ms", "GFLOP", "TFLOP/s");
    out << line;
    double total_ms = 0, total_flops = 0;
    for (auto& s : stages) {
      if (s.name == "advance") continue;
      std::vector<float> ms;
      for (int r = 0; r < repeats; ++r) {
        AE_CUDA_CHECK(cudaEventRecord(t0, stream_));
        s.run(stream_);
        AE_CUDA_CHECK(cudaEventRecord(t1, stream_));
        AE_CUDA_CHECK(cudaEventSynchronize(t1));
        float v = 0;
        AE_CUDA_CHECK(cudaEventElapsedTime(&v, t0, t1));
        ms.push_back(v);
      }
      std::sort(ms.begin(), ms.end());
      const double med = ms[ms.size() / 2];
      total_ms += med;
      total_flops += s.flops;
      std::snprintf(line, sizeof line, "  %-26s %9.4f %9.2f %9.1f\n", s.name.c_str(), med, s.flops / 1e9,
                    s.flops > 0 ? s.flops / (med * 1e-3) / 1e12 : 0.0);
      out << line;
    }
    std::snprintf(line, sizeof line, "  %-26s %9.4f %9.2f %9.1f\n", "sum of stages", total_ms, total_flops / 1e9,
                  total_flops / (total_ms * 1e-3) / 1e12);
    out << line;
    // The whole step as the graph replays it.
    reset();
    cudaGraphExec_t g = graph_for(batch);
    std::vector<float> ms;
    for (int r = 0; r < repeats; ++r) {
      reset();
      AE_CUDA_CHECK(cudaEventRecord(t0, stream_));
      AE_CUDA_CHECK(cudaGraphLaunch(g, stream_));
      AE_CUDA_CHECK(cudaEventRecord(t1, stream_));
      AE_CUDA_CHECK(cudaEventSynchronize(t1));
      float v = 0;
      AE_CUDA_CHECK(cudaEventElapsedTime(&v, t0, t1));
      ms.push_back(v);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::snprintf(line, sizeof line, "  %-26s %9.4f %9.2f %9.1f  (%.3f s per 50,000 images)\n", "graph replay (whole step)",
                  med, total_flops / 1e9, total_flops / (med * 1e-3) / 1e12, med * 1e-3 * 50000.0 / batch);
    out << line;
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    reset();
    return out.str();
  }

 private:
  // ---- buffers ----
  // Every layer's packed weights: the forward copy and the input-gradient copy, in the
  // form each convolution reads (layers_cuda.cuh, PackKind). The padding stays zero.
  void allocate_packed_weights() {
    const size_t es = dtype_bytes(dt_);
    struct Spec {
      PackKind kind;
      int kpad, pitch;
    };
    const Spec fwd[kNumConvs] = {{PackKind::fwd_rgb, 64, 3},  // (reads stop at column 32: taps = 1)
                                 {PackKind::fwd3, 2304, 256},
                                 {PackKind::fwd3, 1152, 128},
                                 {PackKind::fwd_up2_parity, 512, 128},
                                 {PackKind::fwd_up2_subpixel, 2304, 256}};
    const Spec bwd[kNumConvs] = {{PackKind::bwd3, 0, 0},
                                 {PackKind::bwd3, 1152, 128},
                                 {PackKind::bwd3, 1152, 128},
                                 {PackKind::bwd_down2_4x4, 4096, 256},
                                 {PackKind::bwd_down2_4x4, 128, kOutPitch}};
    std::vector<PackedWeights> items;
    for (int l = 0; l < kNumConvs; ++l)
      for (const Spec* sp : {&fwd[l], &bwd[l]}) {
        if (sp->kpad == 0) continue;
        PackedWeights p;
        p.kind = sp->kind;
        p.weight_offset = weight_offset(l);
        p.K = kConvs[l].out;
        p.C = kConvs[l].in;
        p.kpad = sp->kpad;
        p.pitch = sp->pitch;
        items.push_back(p);
      }
    size_t total = 0;
    for (const auto& p : items) total += size_t(p.count()) * es;
    packed_.resize(total);
    AE_CUDA_CHECK(cudaMemsetAsync(packed_.get(), 0, total, stream_));
    size_t off = 0;
    int idx = 0;
    for (int l = 0; l < kNumConvs; ++l) {
      fwd_w_[l] = packed_.get() + off;
      items[size_t(idx)].dst = fwd_w_[l];
      off += size_t(items[size_t(idx++)].count()) * es;
      if (bwd[l].kpad == 0) continue;
      bwd_w_[l] = packed_.get() + off;
      bwd_kpad_[l] = bwd[l].kpad;
      items[size_t(idx)].dst = bwd_w_[l];
      off += size_t(items[size_t(idx++)].count()) * es;
    }
    for (const auto& p : items) packs_.add(p);
  }

  void ensure_capacity(int batch) {
    if (batch <= cap_) return;
    drop_graphs();
    const size_t es = dtype_bytes(dt_);
    const size_t B = size_t(batch);
    auto alloc = [&](DeviceBuffer<char>& buf, size_t bytes) {
      buf.release();
      buf.resize(bytes);
    };
    alloc(col1_buf_, B * 1024 * 32 * es);
    alloc(p1_buf_, B * 256 * 256 * es);
    alloc(am1_buf_, B * 256 * 256);
    alloc(z_buf_, B * 64 * 128 * es);
    alloc(am2_buf_, B * 64 * 128);
    alloc(a3_buf_, B * 64 * 128 * es);
    alloc(a4_buf_, B * 256 * 256 * es);
    alloc(dout_buf_, B * 1024 * kOutPitch * es);
    alloc(fold_buf_, B * 256 * kFoldPitch * es);
    alloc(dy4_buf_, B * 256 * 256 * es);
    alloc(dy3_buf_, B * 64 * 128 * es);
    alloc(dy2_buf_, B * 256 * 128 * es);
    alloc(dy1_buf_, B * (explicit_unpool() ? 1024 : 256) * 256 * es);
    col1_ = col1_buf_.get();
    size_t ws = 0;
    for (const auto& w : wgrad_layers(batch)) ws = std::max(ws, w.plan.workspace_floats());
    for (int b = 0; b < side_branches(); ++b) {
      wgrad_ws_[b].release();
      wgrad_ws_[b].resize(ws);
      bias_ws_[b].resize(bias_grad_work_floats(256));
    }
    cap_ = batch;
  }

  void upload_order(const std::vector<int64_t>& order) {
    order_host_.resize(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] < 0 || order[i] >= n_train_)
        throw std::invalid_argument("train_epoch: order holds image " + std::to_string(order[i]) + " of " +
                                    std::to_string(n_train_));
      order_host_[i] = int(order[i]);
    }
    if (order.size() > order_.size()) {
      drop_graphs();
      order_.release();
      order_.resize(std::max(order.size(), size_t(n_train_)));
    }
    AE_CUDA_CHECK(cudaMemcpyAsync(order_.get(), order_host_.data(), sizeof(int) * order.size(), cudaMemcpyHostToDevice,
                                  stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // order_host_ may change on the next call
  }

  void set_lr(float lr) {
    lr_host_ = lr;
    AE_CUDA_CHECK(cudaMemcpyAsync(lr_.get(), &lr_host_, sizeof(float), cudaMemcpyHostToDevice, stream_));
  }

  double read_loss() {
    double h = 0;
    AE_CUDA_CHECK(cudaMemcpyAsync(&h, loss_.get(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return h;
  }

  static void parallel_copy(float* dst, const float* src, size_t count) {
    const size_t piece = size_t(1) << 18;  // 1 MiB of floats
    const int64_t pieces = int64_t((count + piece - 1) / piece);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < pieces; ++i) {
      const size_t b = size_t(i) * piece, e = std::min(count, b + piece);
      std::memcpy(dst + b, src + b, (e - b) * sizeof(float));
    }
  }

  const float* bias_of(int layer) const { return params_.get() + bias_offset(layer); }
  void* fwd_w(int l) const { return fwd_w_[l]; }
  void* bwd_w(int l) const { return bwd_w_[l]; }

  // ---- the network ----
  void forward_encoder(int B, float* latent, cudaStream_t s) {
    forward_encoder_layer(0, B, nullptr, s);
    forward_encoder_layer(1, B, latent, s);
  }

  // Decoder and loss. Targets are images[order[*pos + i]] (order null: images[i]).
  void forward_decoder(int B, const uint8_t* images, const int* order, const int* pos, bool with_grad, float* recon,
                       cudaStream_t s, int only_layer = -1) {
    ConvArgs d1;
    d1.src = z_buf_.get();
    d1.images = B;
    d1.Hs = d1.Ws = 8;
    d1.Cs = 128;
    d1.Kpad = 1152;
    d1.weights = fwd_w(2);
    d1.N = 128;
    d1.bias = bias_of(2);
    d1.relu = true;
    d1.out = a3_buf_.get();
    d1.ldo = 128;
    if (only_layer < 0 || only_layer == 2) conv_igemm(d1, dt_, s);

    ConvArgs d2;
    d2.src = a3_buf_.get();
    d2.images = B;
    d2.Hs = d2.Ws = 8;
    d2.Cs = 128;
    d2.shape = ConvShape::up2_parity;
    d2.Kpad = 512;
    d2.weights = fwd_w(3);
    d2.N = 256;
    d2.bias = bias_of(3);
    d2.relu = true;
    d2.out = a4_buf_.get();
    d2.ldo = 256;
    if (only_layer < 0 || only_layer == 3) conv_igemm(d2, dt_, s);

    ConvArgs d3;
    d3.src = a4_buf_.get();
    d3.images = B;
    d3.Hs = d3.Ws = 16;
    d3.Cs = 256;
    d3.shape = ConvShape::up2_subpixel;  // 3 channels: all four parities in one GEMM
    d3.Kpad = 2304;
    d3.weights = fwd_w(4);
    d3.N = 3;
    d3.epilogue = ConvEpilogue::loss;
    d3.bias = bias_of(4);
    d3.out = with_grad ? dout_buf_.get() : nullptr;
    d3.ldo = kOutPitch;
    d3.images_u8 = images;
    d3.order = order;
    d3.order_pos = pos;
    d3.grad_scale = 2.f / (float(B) * kImageDim);
    d3.loss_sum = loss_.get();
    d3.out_nchw = recon;
    if (only_layer < 0 || only_layer == 4) conv_igemm(d3, dt_, s);
  }

  struct WgradLayer {
    int layer;
    PixelMatrix a, b;
    WgradPlan plan;
    WgradScatter scatter;
  };

  // Each layer's weight gradient as a GEMM over pixels, with the operands chosen so that
  // the gathered patch is the one with fewer channels (see docs/GPU.md).
  std::vector<WgradLayer> wgrad_layers(int B) {
    std::vector<WgradLayer> w;
    auto add = [&](int layer, PixelMatrix a, PixelMatrix b, int grid, int parities, WgradScatter sc) {
      WgradLayer l;
      l.layer = layer;
      l.a = a;
      l.b = b;
      l.plan = plan_wgrad(a.width(), b.width(), B, grid, grid, parities, dt_);
      sc.weight_grad = grad_.get() + weight_offset(layer);
      sc.K = kConvs[layer].out;
      sc.C = kConvs[layer].in;
      l.scatter = sc;
      w.push_back(l);
    };
    using PM = PixelMatrix;
    WgradScatter s4;  // dconv3: a4 × dout folded onto a4's grid (up2_fold_output_grad)
    s4.mode = WgradScatter::in_by_flipped_patch;
    s4.Cs = 3;
    add(4, PM{a4_buf_.get(), 16, 16, 256, 1, PM::plain, false}, PM{fold_buf_.get(), 16, 16, kFoldPitch, 1, PM::plain, false},
        16, 1, s4);
    WgradScatter s3;  // dconv2: per output parity, dY4 at the parity × 2×2 patch of a3
    s3.mode = WgradScatter::out_by_parity_patch;
    s3.Cs = 128;
    add(3, PM{dy4_buf_.get(), 16, 16, 256, 1, PM::plain, true}, PM{a3_buf_.get(), 8, 8, 128, 1, PM::patch2_parity, false}, 8,
        4, s3);
    WgradScatter s2;  // dconv1: dY3 × 3×3 patch of z
    s2.Cs = 128;
    add(2, PM{dy3_buf_.get(), 8, 8, 128, 1, PM::plain, false}, PM{z_buf_.get(), 8, 8, 128, 1, PM::patch3, false}, 8, 1, s2);
    WgradScatter s1;  // conv2: p1 (256 ch) × mirrored patch of dY2 (128 ch)
    s1.mode = WgradScatter::in_by_flipped_patch;
    s1.Cs = 128;
    add(1, PM{p1_buf_.get(), 16, 16, 256, 1, PM::plain, false}, PM{dy2_buf_.get(), 16, 16, 128, 1, PM::patch3_flipped, false},
        16, 1, s1);
    WgradScatter s0;  // conv1: dY1 × the input's im2col (its column 27 gives the bias gradient)
    s0.rgb_im2col = true;
    s0.bias_column = 27;
    s0.bias_grad = grad_.get() + bias_offset(0);
    s0.Cs = 32;
    // dY1 is the pooled gradient (16², ReLU-masked), unpooled inside the GEMM by am1
    const PM dy1 = explicit_unpool()
                       ? PM{dy1_buf_.get(), 32, 32, 256, 1, PM::plain, false}
                       : PM{dy1_buf_.get(), 16, 16, 256, 1, PM::unpooled, false, reinterpret_cast<const uint8_t*>(am1_buf_.get())};
    add(0, dy1, PM{col1_buf_.get(), 32, 32, 32, 1, PM::plain, false}, 32, 1, s0);
    return w;
  }

  // One training step as named stages (the graph captures them in this order).
  std::vector<Stage> step_stages(int B) {
    std::vector<Stage> st;
    const uint8_t* imgs = train_images_.get();
    const int* order = order_.get();
    const int* pos = pos_.get();
    st.push_back({"input im2col", 0, [=](cudaStream_t s) { im2col_rgb(imgs, order, pos, B, col1_, dt_, s); }});
    st.push_back({"conv1 fwd +relu+pool", conv_flops(0, B),
                  [=](cudaStream_t s) { forward_encoder_layer(0, B, nullptr, s); }});
    st.push_back({"conv2 fwd +relu+pool", conv_flops(1, B),
                  [=](cudaStream_t s) { forward_encoder_layer(1, B, nullptr, s); }});
    st.push_back({"dconv1 fwd +relu", conv_flops(2, B),
                  [=](cudaStream_t s) { forward_decoder(B, imgs, order, pos, true, nullptr, s, 2); }});
    st.push_back({"dconv2 fwd (up2 parity) +relu", conv_flops(3, B),
                  [=](cudaStream_t s) { forward_decoder(B, imgs, order, pos, true, nullptr, s, 3); }});
    st.push_back({"dconv3 fwd (sub-pixel) +loss", conv_flops(4, B),
                  [=](cudaStream_t s) { forward_decoder(B, imgs, order, pos, true, nullptr, s, 4); }});
    const std::vector<WgradLayer> wl = wgrad_layers(B);
    const char* names[kNumConvs] = {"conv1", "conv2", "dconv1", "dconv2", "dconv3"};
    for (const WgradLayer& w : wl) {
      const int l = w.layer;
      // The weight gradients of one branch share its workspaces, so they stay in order there.
      const bool unpool_here = l == 0 && !explicit_unpool();  // conv1's operand A is unpooled in the gather
      const int b = side_branch_of(l);
      st.push_back({std::string(names[l]) + (unpool_here ? " wgrad +unpool +bias" : " wgrad +bias"), conv_flops(l, B),
                    [=](cudaStream_t s) {
                      if (l == 4) up2_fold_output_grad(dout_buf_.get(), kOutPitch, 3, B, 16, 16, fold_buf_.get(), kFoldPitch, dt_, s);
                      wgrad_igemm(w.a, w.b, w.plan, wgrad_ws_[b].get(), dt_, s);
                      wgrad_reduce(wgrad_ws_[b].get(), w.plan, w.scatter, s);
                      bias_for_layer(l, B, bias_ws_[b].get(), s);
                    },
                    Lane::side, b});
      if (l > 0)
        st.push_back({std::string(names[l]) + (l >= 3                        ? " bwd-data (4x4 s2)"
                                               : l == 1 && !explicit_unpool() ? " bwd-data +mask"
                                                                              : " bwd-data +unpool"),
                      conv_flops(l, B),
                      [=](cudaStream_t s) { backward_data(l, B, s); }});
    }
    st.push_back({"optimizer", 0, [=](cudaStream_t s) {
                    OptimizerDeviceState o;
                    o.params = params_.get();
                    o.grad = grad_.get();
                    o.m = m_.get();
                    o.v = v_.get();
                    o.step_counter = step_.get();
                    o.lr = lr_.get();
                    o.grad_sumsq = gsq_.get();
                    if (opt_.grad_clip > 0.f) grad_sumsq_compute(grad_.get(), kParamCount, gsq_.get(), s);
                    optimizer_update(opt_, o, kParamCount, s);
                    pack_weights(params_.get(), packs_, dt_, s);
                  },
                  Lane::join});
    st.push_back({"advance", 0, [=](cudaStream_t s) { advance_step(pos_.get(), step_.get(), B, s); }});
    return st;
  }

  // conv1 (on the im2col of the input) and conv2, each with bias, ReLU and 2×2 max pool
  // fused; conv2 can also write the latent codes as fp32 NCHW.
  void forward_encoder_layer(int layer, int B, float* latent, cudaStream_t s) {
    if (layer == 0) {
      ConvArgs c1;
      c1.src = col1_;
      c1.images = B;
      c1.Hs = c1.Ws = 32;
      c1.Cs = 32;
      c1.shape = ConvShape::point1x1;
      c1.Kpad = 64;
      c1.weights = fwd_w(0);
      c1.N = 256;
      c1.epilogue = ConvEpilogue::pool;
      c1.bias = bias_of(0);
      c1.relu = true;
      c1.out = p1_buf_.get();
      c1.ldo = 256;
      c1.argmax_out = reinterpret_cast<uint8_t*>(am1_buf_.get());
      conv_igemm(c1, dt_, s);
    } else {
      ConvArgs c2;
      c2.src = p1_buf_.get();
      c2.images = B;
      c2.Hs = c2.Ws = 16;
      c2.Cs = 256;
      c2.Kpad = 2304;
      c2.weights = fwd_w(1);
      c2.N = 128;
      c2.epilogue = ConvEpilogue::pool;
      c2.bias = bias_of(1);
      c2.relu = true;
      c2.out = z_buf_.get();
      c2.ldo = 128;
      c2.argmax_out = reinterpret_cast<uint8_t*>(am2_buf_.get());
      c2.out_nchw = latent;
      conv_igemm(c2, dt_, s);
    }
  }

  void bias_for_layer(int l, int B, float* work, cudaStream_t s) {
    float* out = grad_.get() + bias_offset(l);
    switch (l) {
      case 4: bias_grad(dout_buf_.get(), int64_t(B) * 1024, kOutPitch, 3, work, out, dt_, s); break;
      case 3: bias_grad(dy4_buf_.get(), int64_t(B) * 256, 256, 256, work, out, dt_, s); break;
      case 2: bias_grad(dy3_buf_.get(), int64_t(B) * 64, 128, 128, work, out, dt_, s); break;
      case 1: bias_grad(dy2_buf_.get(), int64_t(B) * 256, 128, 128, work, out, dt_, s); break;
      default: break;  // conv1: column 27 of its weight-gradient GEMM
    }
  }

  // Gradient w.r.t. layer l's input, fused with the backward of whatever produced that
  // input (upsample + ReLU, or ReLU + max pool), so it lands as the gradient of the
  // previous convolution's pre-activation.
  void backward_data(int l, int B, cudaStream_t s) {
    ConvArgs a;
    a.images = B;
    a.weights = bwd_w(l);
    a.Kpad = bwd_kpad_[l];
    a.N = kConvs[l].in;
    switch (l) {
      case 4:  // dconv3: 4×4 stride-2 over dout (32², 8) × (a4 > 0) → dY4 (16², 256)
        a.src = dout_buf_.get();
        a.Hs = a.Ws = 32;
        a.Cs = kOutPitch;
        a.shape = ConvShape::down2_4x4;
        a.epilogue = ConvEpilogue::mask;
        a.aux = a4_buf_.get();
        a.ld_aux = 256;
        a.out = dy4_buf_.get();
        a.ldo = 256;
        break;
      case 3:  // dconv2: 4×4 stride-2 over dY4 (16², 256) × (a3 > 0) → dY3 (8², 128)
        a.src = dy4_buf_.get();
        a.Hs = a.Ws = 16;
        a.Cs = 256;
        a.shape = ConvShape::down2_4x4;
        a.epilogue = ConvEpilogue::mask;
        a.aux = a3_buf_.get();
        a.ld_aux = 128;
        a.out = dy3_buf_.get();
        a.ldo = 128;
        break;
      case 2:  // dconv1: dY3 (8², 128) → ×(z>0), unpool(am2) → dY2 (16², 128)
        a.src = dy3_buf_.get();
        a.Hs = a.Ws = 8;
        a.Cs = 128;
        a.epilogue = ConvEpilogue::unpool_mask;
        a.aux = z_buf_.get();
        a.ld_aux = 128;
        a.argmax_in = reinterpret_cast<const uint8_t*>(am2_buf_.get());
        a.out = dy2_buf_.get();
        a.ldo = 128;
        break;
      case 1:  // conv2: dY2 (16², 128) → ×(p1>0) → dY1 at the pooled grid (16², 256); conv1's
               // weight gradient unpools it by am1 as it reads it (AE_EXPLICIT_UNPOOL=1: here)
        a.src = dy2_buf_.get();
        a.Hs = a.Ws = 16;
        a.Cs = 128;
        a.epilogue = explicit_unpool() ? ConvEpilogue::unpool_mask : ConvEpilogue::mask;
        a.aux = p1_buf_.get();
        a.ld_aux = 256;
        a.argmax_in = reinterpret_cast<const uint8_t*>(am1_buf_.get());
        a.out = dy1_buf_.get();
        a.ldo = 256;
        break;
      default:
        return;
    }
    conv_igemm(a, dt_, s);
  }

  cudaGraphExec_t graph_for(int B) {
    auto it = graphs_.find(B);
    if (it != graphs_.end()) return it->second;
    std::vector<Stage> stages = step_stages(B);
    cudaGraph_t graph = nullptr;
    AE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      // AE_GRAPH_ONE_STREAM=1 captures everything on one stream (to measure what the
      // side branch buys).
      static const bool one_stream = std::getenv("AE_GRAPH_ONE_STREAM") != nullptr;
      size_t forks = 0;
      bool side_open[kSideBranches] = {};
      auto join_sides = [&] {  // main waits for everything issued on the side branches
        for (int b = 0; b < kSideBranches; ++b) {
          if (!side_open[b]) continue;
          AE_CUDA_CHECK(cudaEventRecord(join_events_[b], side_streams_[b]));
          AE_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_events_[b], 0));
          side_open[b] = false;
        }
      };
      for (auto& s : stages) {
        if (s.lane == Lane::side && !one_stream) {
          if (forks == fork_events_.size()) {
            fork_events_.emplace_back();
            AE_CUDA_CHECK(cudaEventCreateWithFlags(&fork_events_.back(), cudaEventDisableTiming));
          }
          cudaStream_t side = side_streams_[s.branch];
          AE_CUDA_CHECK(cudaEventRecord(fork_events_[forks], stream_));
          AE_CUDA_CHECK(cudaStreamWaitEvent(side, fork_events_[forks], 0));
          ++forks;
          s.run(side);
          side_open[s.branch] = true;
          continue;
        }
        if (s.lane == Lane::join) join_sides();
        s.run(stream_);
      }
      join_sides();  // a capture must end with every forked stream joined
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    AE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    AE_CUDA_CHECK(err);
    graphs_[B] = exec;
    return exec;
  }

  void drop_graphs() {
    if (!graphs_.empty() && stream_) cudaStreamSynchronize(stream_);
    for (auto& g : graphs_) cudaGraphExecDestroy(g.second);
    graphs_.clear();
  }

  OptimizerConfig opt_;
  Precision precision_;
  DType dt_;
  std::string gpu_name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t events_[2] = {nullptr, nullptr};
  cudaStream_t side_streams_[kSideBranches] = {};  // the weight-gradient branches of captured graphs
  std::vector<cudaEvent_t> fork_events_;
  cudaEvent_t join_events_[kSideBranches] = {};

  DeviceBuffer<float> params_, grad_, m_, v_;
  DeviceBuffer<char> packed_;
  PackList packs_;
  void* fwd_w_[kNumConvs] = {};
  void* bwd_w_[kNumConvs] = {};
  int bwd_kpad_[kNumConvs] = {};
  DeviceBuffer<uint8_t> train_images_;
  int64_t n_train_ = 0;
  DeviceBuffer<int> order_;
  std::vector<int> order_host_;
  DeviceBuffer<int> pos_;
  DeviceBuffer<int64_t> step_;
  DeviceBuffer<float> lr_;
  float lr_host_ = 0.f;
  DeviceBuffer<double> loss_, gsq_;

  int cap_ = 0;
  DeviceBuffer<char> col1_buf_, p1_buf_, am1_buf_, z_buf_, am2_buf_, a3_buf_, a4_buf_, dout_buf_, fold_buf_, dy4_buf_, dy3_buf_,
      dy2_buf_, dy1_buf_;
  void* col1_ = nullptr;
  DeviceBuffer<float> wgrad_ws_[kSideBranches], bias_ws_[kSideBranches];  // one per side branch
  DeviceBuffer<uint8_t> stage_;
  DeviceBuffer<float> recon_, latent_dev_;
  PinnedBuffer pinned_[2];
  std::map<int, cudaGraphExec_t> graphs_;
};

}  // namespace

std::unique_ptr<AeBackend> make_gpu_backend(const OptimizerConfig& opt, Precision precision) {
  return std::make_unique<GpuBackend>(opt, precision);
}

namespace cuda {
std::string profile_training_step(AeBackend& backend, int batch, int repeats) {
  auto* gpu = dynamic_cast<GpuBackend*>(&backend);
  if (!gpu) throw std::invalid_argument("profile_training_step: not a GPU backend");
  return gpu->profile(batch, repeats);
}
}  // namespace cuda

}  // namespace ae
