// The GPU backend of the autoencoder (AeBackend on CUDA) for any Architecture of the family.
// See docs/GPU.md. The tools create it through make_gpu_backend (kernels/ae/backend.h,
// backend_gpu.cu); the class is in a header so that the step profiler
// (tests/gpu/support/stepped_gpu_backend.cuh) can derive from it.
//
// Everything per layer — GEMM shapes, epilogues, packed weights, tensors, graph branches —
// comes from the plan (plan.h, make_plan); this class runs it. One training step is the
// plan's layers forward, then backward (weight gradient on a side branch, input gradient on
// the main chain), then the optimizer, captured once per batch size into a CUDA graph and
// replayed: no allocation, no host synchronisation, no per-kernel launch cost. The training
// images stay on the GPU as uint8; a kernel gathers a step's images through the shuffled
// order (read on the device at *pos) and normalises them, during the step before.
// Activations are NHWC in bf16 or fp32; the master weights, the gradient and the optimizer
// state are fp32, and the optimizer stage also refreshes the packed (and, in bf16 mode,
// rounded) weight copies the convolutions read.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/cuda_check.cuh"
#include "kernels/ae/backend.h"
#include "kernels/ae/cuda/layers_cuda.cuh"
#include "kernels/ae/cuda/nccl_group.h"
#include "kernels/ae/cuda/plan.h"
#include "kernels/ae/data_parallel.h"
#include "kernels/ae/model.h"

namespace ae::cuda {

using cae::cuda::DeviceBuffer;

constexpr int kEncodeChunk = 1024;  // images per encoder launch (results do not depend on it)
constexpr int kEvalChunk = 256;     // images per eval_loss / reconstruct launch, at least
constexpr int kProgressEvery = 50;  // steps between loss read-backs when a callback is set (or in a group,
                                    // always: the wait is where a failed peer is noticed)

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
  int branch = 0;          // side: which side stream (the plan's WgradOp::branch)
  // side, in a data-parallel group: the parameters whose gradient this stage completes,
  // all-reduced right after it on the communication stream (one bucket per layer).
  int64_t reduce_first = 0, reduce_count = 0;
};

// How a convolution's tile is chosen (conv_tile). `timed`: the fastest candidate at this
// batch, timed once. `borrowed`: the tile timed for the nearest batch, never timed afresh —
// for work done once an epoch (its last, smaller batch; the samples' reconstruction), where
// timing every candidate (0.017 s for the seed model's last batch of 8 on an H200) costs
// more than the best tile wins. `rule`: the rule's tile (encode: a few dozen chunks of two
// convolutions do not win back the time timing the candidates takes). Every tile gives the
// same bits (PlanLayer.EveryTileGivesTheSameBits): the choice is only about time.
enum class TileChoice { timed, borrowed, rule };

// Where the loss epilogue finds its targets and what the forward pass writes besides its
// activations.
struct ForwardIo {
  const uint8_t* images = nullptr;  // uint8 NCHW; image i of the batch: images[order[*pos + i]]
  const int* order = nullptr;       // null: images[i]
  const int* pos = nullptr;
  bool with_grad = false;  // the loss epilogue writes d loss / d out
  int loss_batch = 0;      // the batch whose mean loss is differentiated (the global batch of a
                           // group; 0: this launch's)
  float* latent = nullptr; // fp32 NCHW latent codes of the last encoder layer
  float* recon = nullptr;  // fp32 NCHW reconstruction
  TileChoice tiles = TileChoice::timed;
};

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

class GpuBackend : public AeBackend {
 public:
  GpuBackend(const Architecture& arch, const OptimizerConfig& opt, Precision precision,
             const DataParallelGroup* group = nullptr)
      : arch_(arch), opt_(opt), precision_(precision), dt_(precision == Precision::bf16 ? DType::bf16 : DType::f32) {
    if (opt_.kind != "adam" && opt_.kind != "sgd") throw std::invalid_argument("unknown optimizer '" + opt_.kind + "'");
    plan_ = std::make_unique<Plan>(make_plan(arch_, 1, dt_));  // throws for what the GPU cannot run
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw std::runtime_error("--device gpu: no CUDA GPU found");
    int device = 0;
    if (group) {
      device = group->local_rank % n;
      AE_CUDA_CHECK(cudaSetDevice(device));
    }
    cudaDeviceProp prop;
    AE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    gpu_name_ = prop.name;
    sm_count_ = prop.multiProcessorCount;
    if (prop.major < 8)
      throw std::runtime_error(std::string("--device gpu: ") + prop.name + " is too old (needs compute capability 8.0+)");
    AE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    int least_priority = 0, greatest_priority = 0;
    AE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least_priority, &greatest_priority));
    AE_CUDA_CHECK(cudaStreamCreateWithPriority(&first_stream_, cudaStreamNonBlocking, greatest_priority));
    for (int b = 0; b < Plan::kBranches; ++b) {
      AE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_streams_[b], cudaStreamNonBlocking));
      AE_CUDA_CHECK(cudaEventCreateWithFlags(&join_events_[b], cudaEventDisableTiming));
    }
    for (auto& e : events_) AE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    if (group) {
      group_ = std::make_unique<NcclGroup>(group->rank, group->world, group->rendezvous, group->timeout_seconds);
      AE_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
      AE_CUDA_CHECK(cudaEventCreateWithFlags(&comm_join_, cudaEventDisableTiming));
    }

    const size_t P = size_t(arch_.param_count());
    params_.resize(P);
    grad_.resize(P);
    m_.resize(P);
    v_.resize(P);
    AE_CUDA_CHECK(cudaMemsetAsync(params_.get(), 0, params_.bytes(), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(grad_.get(), 0, grad_.bytes(), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(m_.get(), 0, m_.bytes(), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(v_.get(), 0, v_.bytes(), stream_));
    pos_.resize(1);
    order_end_.resize(1);
    step_.resize(1);
    lr_.resize(1);
    loss_.resize(1);
    loss_total_.resize(1);
    stop_vote_.resize(2);
    gsq_.resize(1);
    AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(order_end_.get(), 0, sizeof(int), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(step_.get(), 0, sizeof(int64_t), stream_));
    set_lr(opt_.lr);
    packs_.allocate(*plan_, stream_);  // the packed layouts do not depend on the batch
    set_params(init_params(arch_, 0));  // as the CPU backend starts
    if (group_) connect_group();
  }

  // Every collective the step's graph will capture, run once eagerly on zeros. NCCL
  // connects peers lazily, at a communicator's first collective of each kind; inside a
  // stream capture that connection fails (with ranks as threads of one process the p2p
  // transport cannot even map the peer's memory: "operation not permitted when stream is
  // capturing"). After this round every connection the captured all-reduces need exists.
  void connect_group() {
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // grad_ zeroed: the sums leave it zero
    for (const auto& r : reduce_buckets()) group_->all_reduce_sum(grad_.get() + r.first, size_t(r.second), comm_stream_);
    group_->all_reduce_sum(loss_.get(), loss_total_.get(), 1, comm_stream_);
    group_->wait(comm_stream_, "connecting the group");
  }

  ~GpuBackend() override {
    drop_graphs();
    if (comm_join_) cudaEventDestroy(comm_join_);
    if (comm_stream_) cudaStreamDestroy(comm_stream_);
    for (auto& e : events_)
      if (e) cudaEventDestroy(e);
    for (auto& e : fork_events_) cudaEventDestroy(e);
    for (auto& e : reduce_events_) cudaEventDestroy(e);
    for (int b = 0; b < Plan::kBranches; ++b) {
      if (join_events_[b]) cudaEventDestroy(join_events_[b]);
      if (side_streams_[b]) cudaStreamDestroy(side_streams_[b]);
    }
    if (first_stream_) cudaStreamDestroy(first_stream_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string describe() const override {
    return gpu_name_ + ", " + precision_name(precision_) + " (implicit GEMM, " + (has_wgmma() ? "wgmma + " : "") +
           "mma.sync " + (precision_ == Precision::bf16 ? "bf16" : "tf32") + ")" + (group_ ? "; " + group_->describe() : "");
  }
  const Architecture& architecture() const override { return arch_; }

  void set_params(const std::vector<float>& p) override {
    if (int64_t(p.size()) != arch_.param_count())
      throw std::invalid_argument("set_params: expected " + std::to_string(arch_.param_count()) + " values, got " +
                                  std::to_string(p.size()));
    AE_CUDA_CHECK(cudaMemcpyAsync(params_.get(), p.data(), params_.bytes(), cudaMemcpyHostToDevice, stream_));
    packs_.pack(params_.get(), dt_, stream_);
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  std::vector<float> params() const override {
    std::vector<float> p(size_t(arch_.param_count()));
    AE_CUDA_CHECK(cudaMemcpyAsync(p.data(), params_.get(), params_.bytes(), cudaMemcpyDeviceToHost, stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return p;
  }

  void set_optimizer_state(const OptimizerState& s) override {
    auto upload = [&](const std::vector<float>& src, DeviceBuffer<float>& dst, const char* what) {
      if (src.empty()) {
        AE_CUDA_CHECK(cudaMemsetAsync(dst.get(), 0, dst.bytes(), stream_));
      } else {
        if (int64_t(src.size()) != arch_.param_count())
          throw std::invalid_argument(std::string("optimizer state: ") + what + " must have " +
                                      std::to_string(arch_.param_count()) + " values");
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
      s.m.resize(size_t(arch_.param_count()));
      AE_CUDA_CHECK(cudaMemcpyAsync(s.m.data(), m_.get(), m_.bytes(), cudaMemcpyDeviceToHost, stream_));
    }
    if (has_v) {
      s.v.resize(size_t(arch_.param_count()));
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
    train_images_.resize(size_t(n) * size_t(arch_.image_dim()));
    // Page-locked while they go up (cae::cuda::PinnedRange): CIFAR-10's 138 MB of training
    // images through the driver's pageable staging took 0.02 s of every run on an H200.
    const cae::cuda::PinnedRange pinned(images, train_images_.bytes());
    AE_CUDA_CHECK(cudaMemcpy(train_images_.get(), images, train_images_.bytes(), cudaMemcpyHostToDevice));
    n_train_ = n;
  }

  // 128 steps: 0.03–0.12 s of an H200 for the seed model; with 16, each call's order
  // upload and closing loss read (~0.06 ms of idle GPU) cost 0.8 % of an fp32 epoch at
  // batch 64 (docs/BENCHMARKS.md).
  int steps_per_call() const override { return 128; }

  double train_epoch(const std::vector<int64_t>& order, int batch, float lr, const StepCallback& on_progress) override {
    if (n_train_ == 0) throw std::logic_error("train_epoch: set_train_images() first");
    if (batch <= 0) throw std::invalid_argument("train_epoch: batch must be positive");
    const int64_t n = int64_t(order.size());
    if (n == 0) return 0.0;
    const double dim = double(arch_.image_dim());
    // In a group this rank trains its shard of every global batch of `order`.
    const int world = group_ ? group_->world() : 1;
    const EpochShard shard = shard_epoch(order, batch, group_ ? group_->rank() : 0, world);
    upload_order(shard.rows);
    const int64_t full = n / (int64_t(batch) * world);
    const int rest = full < int64_t(shard.local_sizes.size()) ? shard.local_sizes.back() : 0;
    const int rest_global = full < int64_t(shard.global_sizes.size()) ? shard.global_sizes.back() : 0;
    ensure_capacity(full > 0 ? batch : std::max(rest, 1));
    if (full > 0) ensure_workspaces(batch);
    if (rest > 0) ensure_workspaces(rest);
    set_lr(lr);
    AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_));
    AE_CUDA_CHECK(cudaMemsetAsync(loss_.get(), 0, sizeof(double), stream_));

    // Every graph this epoch needs exists before the first step runs.
    cudaGraphExec_t g_full = full > 0 ? graph_for(batch, batch * world) : nullptr;
    cudaGraphExec_t g_rest = rest > 0 ? graph_for(rest, rest_global, TileChoice::borrowed) : nullptr;
    // Each step gathers the next one's images (step_stages); the first step's come first.
    if (g_full || g_rest) input_im2col(train_images_.get(), order_.get(), pos_.get(), full > 0 ? batch : rest, stream_);
    for (int64_t s = 0; s < full; ++s) {
      AE_CUDA_CHECK(cudaGraphLaunch(g_full, stream_));
      if ((on_progress || group_) && (s + 1) % kProgressEvery == 0) {
        const int64_t done = (s + 1) * batch * world;
        const double running = read_loss() / (double(done) * dim);
        if (on_progress) on_progress(done, running);
      }
    }
    if (g_rest) AE_CUDA_CHECK(cudaGraphLaunch(g_rest, stream_));
    if (rest == 0 && rest_global > 0) empty_shard_step();
    const double mean = read_loss() / (double(n) * dim);
    if (on_progress) on_progress(n, mean);
    return mean;
  }

  double eval_loss(const uint8_t* images, int64_t n, int batch) override {
    if (n <= 0) return 0.0;
    // In a group each rank evaluates its share of the images; read_loss() sums them.
    const ShardRange mine = group_ ? shard_of(n, group_->rank(), group_->world()) : ShardRange{0, int(n)};
    const int chunk = int(std::min<int64_t>(std::max<int64_t>(mine.count, 1), std::max(batch, kEvalChunk)));
    ensure_capacity(chunk);
    AE_CUDA_CHECK(cudaMemsetAsync(loss_.get(), 0, sizeof(double), stream_));
    for_chunks(images + mine.first * arch_.image_dim(), mine.count, chunk, [&](int b, int64_t) {
      ForwardIo io;
      io.images = stage_.get();
      forward(b, io, plan_->arch.num_convs() - 1, stream_);
    });
    return read_loss() / (double(n) * double(arch_.image_dim()));
  }

  void reconstruct(const uint8_t* images, int64_t n, float* out) override {
    if (n <= 0) return;
    const int chunk = int(std::min<int64_t>(n, kEvalChunk));
    const size_t dim = size_t(arch_.image_dim());
    ensure_capacity(chunk);
    recon_.resize(size_t(chunk) * dim);
    for_chunks(images, n, chunk, [&](int b, int64_t off) {
      ForwardIo io;
      io.images = stage_.get();
      io.recon = recon_.get();
      io.tiles = TileChoice::borrowed;  // a checkpoint's few samples, once an epoch
      forward(b, io, plan_->arch.num_convs() - 1, stream_);
      AE_CUDA_CHECK(cudaMemcpyAsync(out + off * int64_t(dim), recon_.get(), sizeof(float) * b * dim,
                                    cudaMemcpyDeviceToHost, stream_));
    });
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Chunks of images go up, through the encoder, and come back through two pinned
  // buffers: while the GPU encodes chunk c, the host copies chunk c−1 into `latent`.
  void encode(const uint8_t* images, int64_t n, int batch, float* latent) override {
    const size_t ld = size_t(arch_.latent_dim());
    const int chunk = encode_chunk(n, batch);
    encode_chunks(
        images, n, chunk, sizeof(float) * size_t(chunk) * ld,
        [&](int slot, const float* codes, int b) {
          AE_CUDA_CHECK(cudaMemcpyAsync(pinned_[slot].get(), codes, sizeof(float) * size_t(b) * ld,
                                        cudaMemcpyDeviceToHost, stream_));
        },
        [&](int slot, int64_t off, int b, const float*) {
          parallel_copy(latent + off * int64_t(ld), static_cast<const float*>(pinned_[slot].get()), size_t(b) * ld);
          return true;
        });
  }

  // encode() with the codes rounded to float16 on the GPU as they come out of the encoder
  // (codes_to_halves, which also finds the first one float16 cannot hold): half the bytes
  // cross the bus and the host, once, and nothing on the host rounds or checks them. Stops at
  // the first chunk with such a code and returns it.
  HalfFault encode_halves(const uint8_t* images, int64_t n, int batch, cae::Half* latent) override {
    static_assert(sizeof(cae::Half) == sizeof(uint16_t), "cae::Half is binary16's bits");
    if (n <= 0) return {};
    const size_t ld = size_t(arch_.latent_dim());
    const int chunk = encode_chunk(n, batch);
    halves_dev_.resize(2 * size_t(chunk) * ld);
    first_bad_dev_.resize(4);
    // Each slot: the chunk's first non-finite and first out-of-range index (16 bytes), then its halves.
    constexpr size_t kHeader = 2 * sizeof(unsigned long long);
    HalfFault fault;
    encode_chunks(
        images, n, chunk, kHeader + sizeof(uint16_t) * size_t(chunk) * ld,
        [&](int slot, const float* codes, int b) {
          uint16_t* halves = halves_dev_.get() + size_t(slot) * chunk * ld;
          unsigned long long* first_bad = first_bad_dev_.get() + 2 * slot;
          AE_CUDA_CHECK(cudaMemsetAsync(first_bad, 0xff, kHeader, stream_));
          codes_to_halves(codes, halves, int64_t(b) * int64_t(ld), first_bad, stream_);
          uint8_t* dst = static_cast<uint8_t*>(pinned_[slot].get());
          AE_CUDA_CHECK(cudaMemcpyAsync(dst, first_bad, kHeader, cudaMemcpyDeviceToHost, stream_));
          AE_CUDA_CHECK(cudaMemcpyAsync(dst + kHeader, halves, sizeof(uint16_t) * size_t(b) * ld,
                                        cudaMemcpyDeviceToHost, stream_));
        },
        [&](int slot, int64_t off, int b, const float* codes) {
          const uint8_t* src = static_cast<const uint8_t*>(pinned_[slot].get());
          const unsigned long long* first_bad = reinterpret_cast<const unsigned long long*>(src);
          const unsigned long long bad = first_bad[0] != ~0ull ? first_bad[0] : first_bad[1];
          if (bad == ~0ull) {
            parallel_copy(latent + off * int64_t(ld), reinterpret_cast<const cae::Half*>(src + kHeader), size_t(b) * ld);
            return true;
          }
          float value = 0;  // the chunk's codes are still in its slot: the next chunk fills the other one
          AE_CUDA_CHECK(cudaMemcpyAsync(&value, codes + bad, sizeof(float), cudaMemcpyDeviceToHost, stream_));
          AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
          fault = {off * int64_t(ld) + int64_t(bad), value};
          return false;
        });
    return fault;
  }

 protected:
  // Protected, not private: the step profiler (tests/gpu/support/stepped_gpu_backend.cuh)
  // derives from this class to issue one step stage by stage; the backend holds no
  // profiling code of its own.
  // ---- buffers ----
  // The step's tensors for `batch` images (the plan sized for it); graphs captured with the
  // old pointers go.
  void ensure_capacity(int batch) {
    if (batch <= cap_) return;
    drop_graphs();
    plan_ = std::make_unique<Plan>(make_plan(arch_, batch, dt_));
    bufs_.allocate(*plan_, batch, stream_);
    cap_ = batch;
  }

  // Images per encoder chunk: `batch`, at least kEncodeChunk, at most n.
  static int encode_chunk(int64_t n, int batch) {
    return int(std::min<int64_t>(std::max<int64_t>(n, 1), std::max(batch, kEncodeChunk)));
  }

  // The encoder over chunks of `chunk` images (encode_chunk), two in flight: chunk c runs
  // through the encoder into its slot of latent_dev_, then send(slot, codes, b) enqueues the copies of
  // what the host needs into pinned_[slot] (slot_bytes each); meanwhile the host waits
  // for chunk c−1 and hands it to take(slot, first image, b, its codes on the device), which
  // returns false to stop: no later chunk is encoded (the codes it was given stay intact).
  // Returns with the stream idle: no copy into the pinned slots outlives the call.
  template <typename Send, typename Take>
  void encode_chunks(const uint8_t* images, int64_t n, int chunk, size_t slot_bytes, Send send, Take take) {
    if (n <= 0) return;
    const size_t ld = size_t(arch_.latent_dim());
    ensure_capacity(chunk);
    latent_dev_.resize(2 * size_t(chunk) * ld);
    pinned_[0].resize(slot_bytes);
    pinned_[1].resize(slot_bytes);
    auto codes_of = [&](int slot) { return latent_dev_.get() + size_t(slot) * chunk * ld; };
    int64_t pending_off = -1;
    int pending_n = 0, pending_slot = 0;
    bool go_on = true;
    auto take_pending = [&]() {
      if (pending_off < 0) return;
      AE_CUDA_CHECK(cudaEventSynchronize(events_[pending_slot]));
      go_on = take(pending_slot, pending_off, pending_n, codes_of(pending_slot));
      pending_off = -1;
    };
    int slot = 0;
    for_chunks(images, n, chunk, [&](int b, int64_t off) {
      if (!go_on) return;
      ForwardIo io;
      io.latent = codes_of(slot);
      io.tiles = TileChoice::rule;
      forward(b, io, plan_->latent_layer, stream_);  // the encoder
      send(slot, codes_of(slot), b);
      AE_CUDA_CHECK(cudaEventRecord(events_[slot], stream_));
      take_pending();  // the previous chunk, while this one runs
      pending_off = off;
      pending_n = b;
      pending_slot = slot;
      slot ^= 1;
    });
    if (go_on) take_pending();
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Each side branch's weight-gradient workspace, large enough for every gradient of the
  // branch at `batch` images (the split count, so the size, depends on the batch).
  void ensure_workspaces(int batch) {
    for (int b = 0; b < Plan::kBranches; ++b) {
      const size_t ws = plan_->workspace_floats(b, batch), bw = plan_->bias_work_floats(b);
      if (ws <= wgrad_ws_[b].size() && bw <= bias_ws_[b].size()) continue;
      drop_graphs();
      if (ws > wgrad_ws_[b].size()) {
        wgrad_ws_[b].release();
        wgrad_ws_[b].resize(ws);
      }
      if (bw > bias_ws_[b].size()) {
        bias_ws_[b].release();
        bias_ws_[b].resize(bw);
      }
    }
  }

  // Uploads the images of [0, n) chunk by chunk into stage_ and calls fn(images, offset)
  // after each upload, in stream order.
  template <typename Fn>
  void for_chunks(const uint8_t* images, int64_t n, int chunk, Fn fn) {
    const size_t dim = size_t(arch_.image_dim());
    stage_.resize(size_t(chunk) * dim);
    for (int64_t off = 0; off < n; off += chunk) {
      const int b = int(std::min<int64_t>(chunk, n - off));
      AE_CUDA_CHECK(cudaMemcpyAsync(stage_.get(), images + off * int64_t(dim), size_t(b) * dim, cudaMemcpyHostToDevice,
                                    stream_));
      input_im2col(stage_.get(), nullptr, nullptr, b, stream_);
      fn(b, off);
    }
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
    const int order_end = int(order.size());
    AE_CUDA_CHECK(cudaMemcpyAsync(order_end_.get(), &order_end, sizeof(int), cudaMemcpyHostToDevice, stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // order_host_ may change on the next call (and order_end goes)
  }

  void set_lr(float lr) {
    lr_host_ = lr;
    AE_CUDA_CHECK(cudaMemcpyAsync(lr_.get(), &lr_host_, sizeof(float), cudaMemcpyHostToDevice, stream_));
  }

  // The loss sum so far (over every rank of a group: a collective, which every rank calls
  // at the same points).
  double read_loss() {
    double h = 0;
    if (group_) {
      group_->all_reduce_sum(loss_.get(), loss_total_.get(), 1, stream_);
      AE_CUDA_CHECK(cudaMemcpyAsync(&h, loss_total_.get(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
      group_->wait(stream_, "reading the loss");
      return h;
    }
    AE_CUDA_CHECK(cudaMemcpyAsync(&h, loss_.get(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
    AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return h;
  }

  // True when `flag` is true on any rank of the group: a collective every rank calls at the
  // same step, so that a stop requested on one rank (its own SIGUSR1) stops all of them
  // after the same step.
  bool any_rank(bool flag) override {
    if (!group_) return flag;
    const double mine = flag ? 1.0 : 0.0;
    double total = 0;
    AE_CUDA_CHECK(cudaMemcpyAsync(stop_vote_.get(), &mine, sizeof(double), cudaMemcpyHostToDevice, stream_));
    group_->all_reduce_sum(stop_vote_.get(), stop_vote_.get() + 1, 1, stream_);
    AE_CUDA_CHECK(cudaMemcpyAsync(&total, stop_vote_.get() + 1, sizeof(double), cudaMemcpyDeviceToHost, stream_));
    group_->wait(stream_, "agreeing on a stop");
    return total > 0;
  }

  // A step in which this rank has no image (the epoch's last global batch is shorter than
  // the group): it contributes a zero gradient to the same all-reduces, in the same order,
  // and takes the same optimizer step as the others.
  void empty_shard_step() {
    AE_CUDA_CHECK(cudaMemsetAsync(grad_.get(), 0, grad_.bytes(), stream_));
    for (const auto& r : reduce_buckets()) group_->all_reduce_sum(grad_.get() + r.first, size_t(r.second), stream_);
    optimizer_step(stream_);
    advance_step(pos_.get(), step_.get(), 0, stream_);  // the step counter only
  }

  // The per-layer gradient ranges in the order the step all-reduces them (backward order).
  std::vector<std::pair<int64_t, int64_t>> reduce_buckets() const {
    std::vector<std::pair<int64_t, int64_t>> b;
    for (int l = int(plan_->layers.size()) - 1; l >= 0; --l) {
      const ConvLayer& c = plan_->layers[size_t(l)].conv;
      b.push_back({c.weight_offset, c.bias_offset + c.out - c.weight_offset});
    }
    return b;
  }

  template <typename T>
  static void parallel_copy(T* dst, const T* src, size_t count) {
    const size_t piece = (size_t(1) << 20) / sizeof(T);  // 1 MiB
    const int64_t pieces = int64_t((count + piece - 1) / piece);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < pieces; ++i) {
      const size_t b = size_t(i) * piece, e = std::min(count, b + piece);
      std::memcpy(dst + b, src + b, (e - b) * sizeof(T));
    }
  }

  // ---- the network: the plan's operations, bound to this backend's buffers ----
  void input_im2col(const uint8_t* images, const int* order, const int* pos, int B, cudaStream_t s, int ahead = 0,
                    const int* order_end = nullptr) {
    im2col_input(images, order, pos, B, arch_.input_channels(), arch_.height(), arch_.width(), bufs_.get(plan_->col),
                 plan_->col_pitch, dt_, s, ahead, order_end);
  }

  void forward_layer(const LayerPlan& lp, int B, const ForwardIo& io, cudaStream_t s) {
    ConvArgs a = lp.forward.bind(bufs_, packs_, params_.get(), B);
    if (lp.index == plan_->latent_layer) a.out_nchw = io.latent;
    if (lp.output) {
      if (!io.with_grad) a.out = nullptr;
      a.out_nchw = io.recon;
      a.images_u8 = io.images;
      a.order = io.order;
      a.order_pos = io.pos;
      const int loss_batch = io.loss_batch > 0 ? io.loss_batch : B;
      a.grad_scale = float(2.0 / (double(loss_batch) * double(arch_.image_dim())));  // d(batch-mean MSE)/d(out)
      a.loss_sum = loss_.get();
    }
    a.tile = conv_tile(lp, false, a, B, io.tiles, s);
    conv_igemm(a, dt_, s);
  }

  // Layers 0..last on the im2col of the images (input_im2col first), as the CPU backend's
  // forward(): conv+ReLU+pool per encoder block, conv+ReLU per decoder layer, the loss.
  void forward(int B, const ForwardIo& io, int last, cudaStream_t s) {
    for (int l = 0; l <= last; ++l) forward_layer(plan_->layers[size_t(l)], B, io, s);
  }

  // Gradient w.r.t. layer lp's input, fused with the backward of whatever produced that
  // input (upsample + ReLU, or ReLU + max pool), so it lands as the gradient of the
  // previous convolution's pre-activation.
  void input_grad_layer(const LayerPlan& lp, int B, TileChoice tiles, cudaStream_t s) {
    ConvArgs a = lp.input_grad.bind(bufs_, packs_, params_.get(), B);
    a.tile = conv_tile(lp, true, a, B, tiles, s);
    conv_igemm(a, dt_, s);
  }

  // The tile a convolution runs with at batch B (TileChoice). Timed: the fastest of the
  // candidates (tune_conv_tile, on this step's own buffers, which the step then overwrites)
  // at the smallest batch of B to 4·B timed before, else timed now at B; graph_for has every
  // one timed before its capture. Borrowed: the tile timed at the nearest batch — the
  // smallest larger one, else the largest smaller one —, the rule's where none was timed.
  ConvTile conv_tile(const LayerPlan& lp, bool input_grad, const ConvArgs& a, int B, TileChoice choice, cudaStream_t s) {
    if (choice == TileChoice::rule) return ConvTile::automatic;
    auto same_conv = [&](std::map<TileKey, ConvTile>::const_iterator i) {
      return i != conv_tiles_.end() && std::get<0>(i->first) == lp.index && std::get<1>(i->first) == input_grad;
    };
    const auto above = conv_tiles_.lower_bound({lp.index, input_grad, B});
    if (same_conv(above) && (choice == TileChoice::borrowed || std::get<2>(above->first) <= 4 * B))
      return above->second;
    if (choice == TileChoice::borrowed) {
      const auto below = above == conv_tiles_.begin() ? conv_tiles_.end() : std::prev(above);
      return same_conv(below) ? below->second : ConvTile::automatic;
    }
    return conv_tiles_[{lp.index, input_grad, B}] = tune_conv_tile(a, dt_, s);
  }
  void tune_conv_tiles(int B) {
    for (const LayerPlan& lp : plan_->layers) {
      if (!lp.output)
        conv_tile(lp, false, lp.forward.bind(bufs_, packs_, params_.get(), B), B, TileChoice::timed, stream_);
      if (lp.has_input_grad)
        conv_tile(lp, true, lp.input_grad.bind(bufs_, packs_, params_.get(), B), B, TileChoice::timed, stream_);
    }
  }

  // The optimizer on the (all-reduced) gradient, then the packed weight copies.
  void optimizer_step(cudaStream_t s) {
    const int64_t P = arch_.param_count();
    OptimizerDeviceState o;
    o.params = params_.get();
    o.grad = grad_.get();
    o.m = m_.get();
    o.v = v_.get();
    o.step_counter = step_.get();
    o.lr = lr_.get();
    o.grad_sumsq = gsq_.get();
    if (opt_.grad_clip > 0.f) grad_sumsq_compute(grad_.get(), P, gsq_.get(), s);
    optimizer_update(opt_, o, P, s);
    packs_.pack(params_.get(), dt_, s);
  }

  // One training step as named stages (the graph captures them in this order): the
  // forward pass on the im2col of this step's images, then per layer from the last its
  // weight gradient (a side branch) and its input gradient (the main chain), then the
  // optimizer. The im2col of the next step's images (order positions *pos + B on, up to
  // the epoch's end) is built on the first layer's branch as soon as that layer's weight
  // gradient has read this step's, so the next step starts with its first convolution;
  // train_epoch builds the first step's before the first replay (docs/GPU.md, "The next
  // batch's input").
  // `G` is the global batch of a group step (B otherwise): the loss gradient is that of
  // G images' mean loss, and the gradient all-reduce completes it.
  std::vector<Stage> step_stages(int B, int G, TileChoice tiles = TileChoice::timed) {
    std::vector<Stage> st;
    ForwardIo io;
    io.tiles = tiles;
    io.images = train_images_.get();
    io.order = order_.get();
    io.pos = pos_.get();
    io.with_grad = true;
    io.loss_batch = G;
    for (const LayerPlan& lp : plan_->layers)
      st.push_back({lp.forward_name, lp.flops_per_image * B, [=, &lp](cudaStream_t s) { forward_layer(lp, B, io, s); }});
    for (int l = int(plan_->layers.size()) - 1; l >= 0; --l) {
      const LayerPlan& lp = plan_->layers[size_t(l)];
      const WgradPlan wp = lp.wgrad.gemm_plan(B, dt_);
      const int b = lp.wgrad.branch;
      if (wp.workspace_floats() > wgrad_ws_[b].size())
        throw std::logic_error("GpuBackend: weight-gradient workspace too small (ensure_workspaces first)");
      // The weight gradients of one branch share its workspaces, so they stay in order there.
      st.push_back({lp.wgrad_name, lp.flops_per_image * B,
                    [=, &lp](cudaStream_t s) {
                      lp.wgrad.run(bufs_, B, grad_.get(), wp, wgrad_ws_[b].get(), bias_ws_[b].get(), dt_, s);
                    },
                    Lane::side, b, lp.conv.weight_offset, lp.conv.bias_offset + lp.conv.out - lp.conv.weight_offset});
      if (lp.has_input_grad)
        st.push_back({lp.input_grad_name, lp.flops_per_image * B, [=, &lp](cudaStream_t s) { input_grad_layer(lp, B, tiles, s); }});
    }
    const int* order_end = order_end_.get();
    st.push_back({"input im2col", 0,
                  [=](cudaStream_t s) { input_im2col(io.images, io.order, io.pos, B, s, B, order_end); },
                  Lane::side, plan_->layers.front().wgrad.branch});
    st.push_back({"optimizer", 0, [=](cudaStream_t s) { optimizer_step(s); }, Lane::join});
    st.push_back({"advance", 0, [=](cudaStream_t s) { advance_step(pos_.get(), step_.get(), B, s); }});
    return st;
  }

  // Where the main chain's smallest GEMM cannot fill the GPU (fewer 64-row tiles than
  // multiprocessors: the 8×8 layers at batch 64), the main chain is captured on a stream of
  // the greatest priority and the graph keeps each node's priority: the chain's kernels
  // start first and the weight-gradient branches fill the room they leave. At larger batches
  // every GEMM fills the GPU and the branches' longer work needs it instead (H100, graph
  // replay: batch 64 −2.4 % fp32, −4.0 % bf16; batch 256 with the same priorities +2.7 /
  // +1.4 %, so it keeps one; docs/GPU.md).
  bool main_chain_first(int B) const {
    // the smallest row grid of a main-chain GEMM is the latent's
    const int64_t grid = int64_t(arch_.latent_height()) * arch_.latent_width();
    return (int64_t(B) * grid + 63) / 64 < sm_count_;
  }

  // In a group, each layer's gradient is all-reduced on the communication stream as soon as
  // its weight-gradient kernel is done, while the backward pass goes on (bucket = layer;
  // one stream keeps the collectives in the same order on every rank). `tiles`: timed for
  // the full batch, which every step but an epoch's last runs; borrowed for that last one.
  cudaGraphExec_t graph_for(int B, int G, TileChoice tiles = TileChoice::timed) {
    auto it = graphs_.find({B, G});
    if (it != graphs_.end()) return it->second;
    if (tiles == TileChoice::timed) tune_conv_tiles(B);
    std::vector<Stage> stages = step_stages(B, G, tiles);
    cudaGraph_t graph = nullptr;
    const cudaStream_t main = main_chain_first(B) ? first_stream_ : stream_;
    AE_CUDA_CHECK(cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
    try {
      size_t forks = 0, reduces = 0;
      bool side_open[Plan::kBranches] = {};
      bool comm_open = false;
      auto join_sides = [&] {  // main waits for everything issued on the side branches
        for (int b = 0; b < Plan::kBranches; ++b) {
          if (!side_open[b]) continue;
          AE_CUDA_CHECK(cudaEventRecord(join_events_[b], side_streams_[b]));
          AE_CUDA_CHECK(cudaStreamWaitEvent(main, join_events_[b], 0));
          side_open[b] = false;
        }
        if (comm_open) {
          AE_CUDA_CHECK(cudaEventRecord(comm_join_, comm_stream_));
          AE_CUDA_CHECK(cudaStreamWaitEvent(main, comm_join_, 0));
          comm_open = false;
        }
      };
      for (auto& s : stages) {
        if (s.lane == Lane::side) {
          if (forks == fork_events_.size()) {
            fork_events_.emplace_back();
            AE_CUDA_CHECK(cudaEventCreateWithFlags(&fork_events_.back(), cudaEventDisableTiming));
          }
          cudaStream_t side = side_streams_[s.branch];
          AE_CUDA_CHECK(cudaEventRecord(fork_events_[forks], main));
          AE_CUDA_CHECK(cudaStreamWaitEvent(side, fork_events_[forks], 0));
          ++forks;
          s.run(side);
          side_open[s.branch] = true;
          if (group_ && s.reduce_count > 0) {
            if (reduces == reduce_events_.size()) {
              reduce_events_.emplace_back();
              AE_CUDA_CHECK(cudaEventCreateWithFlags(&reduce_events_.back(), cudaEventDisableTiming));
            }
            AE_CUDA_CHECK(cudaEventRecord(reduce_events_[reduces], side));
            AE_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, reduce_events_[reduces], 0));
            ++reduces;
            group_->all_reduce_sum(grad_.get() + s.reduce_first, size_t(s.reduce_count), comm_stream_);
            comm_open = true;
          }
          continue;
        }
        if (s.lane == Lane::join) join_sides();
        s.run(main);
      }
      join_sides();  // a capture must end with every forked stream joined
    } catch (...) {
      cudaStreamEndCapture(main, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    AE_CUDA_CHECK(cudaStreamEndCapture(main, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    cudaGraphDestroy(graph);
    AE_CUDA_CHECK(err);
    graphs_[{B, G}] = exec;
    return exec;
  }

  void drop_graphs() {
    if (!graphs_.empty() && stream_) cudaStreamSynchronize(stream_);
    for (auto& g : graphs_) cudaGraphExecDestroy(g.second);
    graphs_.clear();
  }

  Architecture arch_;
  OptimizerConfig opt_;
  Precision precision_;
  DType dt_;
  std::unique_ptr<Plan> plan_;  // sized for cap_ images
  std::string gpu_name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t events_[2] = {nullptr, nullptr};
  cudaStream_t first_stream_ = nullptr;  // the greatest priority: see main_chain_first
  int sm_count_ = 0;
  cudaStream_t side_streams_[Plan::kBranches] = {};  // the weight-gradient branches of captured graphs
  std::vector<cudaEvent_t> fork_events_;
  cudaEvent_t join_events_[Plan::kBranches] = {};
  // The data-parallel group (null for one GPU) and where its collectives run.
  std::unique_ptr<NcclGroup> group_;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t comm_join_ = nullptr;
  std::vector<cudaEvent_t> reduce_events_;

  DeviceBuffer<float> params_, grad_, m_, v_;
  PackedSet packs_;
  DeviceBuffer<uint8_t> train_images_;
  int64_t n_train_ = 0;
  DeviceBuffer<int> order_;
  std::vector<int> order_host_;
  DeviceBuffer<int> pos_;        // the step's first position in order_
  DeviceBuffer<int> order_end_;  // the epoch's positions in order_ (its shard's, in a group)
  DeviceBuffer<int64_t> step_;
  DeviceBuffer<float> lr_;
  float lr_host_ = 0.f;
  DeviceBuffer<double> loss_, loss_total_, gsq_;
  DeviceBuffer<double> stop_vote_;  // [this rank's stop flag, the group's sum]

  int cap_ = 0;
  StepBuffers bufs_;
  DeviceBuffer<float> wgrad_ws_[Plan::kBranches], bias_ws_[Plan::kBranches];  // one per side branch
  DeviceBuffer<uint8_t> stage_;
  DeviceBuffer<float> recon_, latent_dev_;
  DeviceBuffer<uint16_t> halves_dev_;                // encode_halves' two slots of float16 codes
  DeviceBuffer<unsigned long long> first_bad_dev_;  // and each slot's first bad codes (codes_to_halves)
  PinnedBuffer pinned_[2];
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs_;  // by (batch, global batch)
  using TileKey = std::tuple<int, bool, int>;  // (layer, input gradient, batch)
  std::map<TileKey, ConvTile> conv_tiles_;
};

}  // namespace ae::cuda
