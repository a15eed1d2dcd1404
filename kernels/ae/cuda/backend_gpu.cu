// The GPU backend (backend_gpu.cuh): construction, parameters and optimizer state, the
// epoch's loop over graph replays, evaluation, reconstruction and encoding, and the
// data-parallel group's collectives outside the step; then make_gpu_backend. The step
// itself is backend_gpu_step.cu.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ae/backend.h"
#include "kernels/ae/cuda/backend_gpu.cuh"
#include "kernels/ae/cuda/nccl_group.h"
#include "kernels/ae/cuda/ops.cuh"
#include "kernels/ae/data_parallel.h"

namespace ae::cuda {
namespace {

constexpr int kEncodeChunk = 1024;  // images per encoder launch (results do not depend on it)
constexpr int kEvalChunk = 256;     // images per eval_loss / reconstruct launch, at least
constexpr int kProgressEvery = 50;  // steps between loss read-backs when a callback is set (or in a group,
                                    // always: the wait is where a failed peer is noticed)

// Images per encoder chunk: `batch`, at least kEncodeChunk, at most n.
int encode_chunk(int64_t n, int batch) {
  return int(std::min<int64_t>(std::max<int64_t>(n, 1), std::max(batch, kEncodeChunk)));
}

// A chunk's codes from its pinned slot into the caller's array, in 1 MiB pieces over
// OpenMP's threads (the copy overlaps the next chunk's encoding: encode_chunks).
template <typename T>
void parallel_copy(T* dst, const T* src, size_t count) {
  const size_t piece = (size_t(1) << 20) / sizeof(T);  // 1 MiB
  const int64_t pieces = int64_t((count + piece - 1) / piece);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t b = size_t(i) * piece, e = std::min(count, b + piece);
    std::memcpy(dst + b, src + b, (e - b) * sizeof(T));
  }
}

}  // namespace

GpuBackend::PinnedBuffer::~PinnedBuffer() {
  if (ptr_) cudaFreeHost(ptr_);
}

void GpuBackend::PinnedBuffer::resize(size_t bytes) {
  if (bytes <= bytes_) return;
  if (ptr_) cudaFreeHost(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  AE_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault));
  bytes_ = bytes;
}

GpuBackend::GpuBackend(const Architecture& arch, const OptimizerConfig& opt, Precision precision,
                       const DataParallelGroup* group)
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
    group_ = std::make_unique<NcclGroup>(group->rank, group->world, group->rendezvous, group->timeout_seconds,
                                         group->agreement);
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
void GpuBackend::connect_group() {
  AE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // grad_ zeroed: the sums leave it zero
  for (const auto& r : reduce_buckets()) group_->all_reduce_sum(grad_.get() + r.first, size_t(r.second), comm_stream_);
  group_->all_reduce_sum(loss_.get(), loss_total_.get(), 1, comm_stream_);
  group_->wait(comm_stream_, "connecting the group");
}

GpuBackend::~GpuBackend() {
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

std::string GpuBackend::describe() const {
  return gpu_name_ + ", " + precision_name(precision_) + " (implicit GEMM, " + (has_wgmma() ? "wgmma + " : "") +
         "mma.sync " + (precision_ == Precision::bf16 ? "bf16" : "tf32") + ")" + (group_ ? "; " + group_->describe() : "");
}

void GpuBackend::set_params(const std::vector<float>& p) {
  if (int64_t(p.size()) != arch_.param_count())
    throw std::invalid_argument("set_params: expected " + std::to_string(arch_.param_count()) + " values, got " +
                                std::to_string(p.size()));
  AE_CUDA_CHECK(cudaMemcpyAsync(params_.get(), p.data(), params_.bytes(), cudaMemcpyHostToDevice, stream_));
  packs_.pack(params_.get(), dt_, stream_);
  AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::vector<float> GpuBackend::params() const {
  std::vector<float> p(size_t(arch_.param_count()));
  AE_CUDA_CHECK(cudaMemcpyAsync(p.data(), params_.get(), params_.bytes(), cudaMemcpyDeviceToHost, stream_));
  AE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return p;
}

void GpuBackend::set_optimizer_state(const OptimizerState& s) {
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

OptimizerState GpuBackend::optimizer_state() const {
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

void GpuBackend::set_train_images(const uint8_t* images, int64_t n) {
  if (n <= 0) throw std::invalid_argument("set_train_images: no images");
  if (n > (int64_t(1) << 31) / 2) throw std::invalid_argument("set_train_images: too many images");
  drop_graphs();
  train_images_.release();
  train_images_.resize(size_t(n) * size_t(arch_.image_dim()));
  // Page-locked while they go up (cae::cuda::PinnedRange): CIFAR-10's 138 MB of training
  // images through the driver's pageable staging were a fixed cost of every run
  // (docs/BENCHMARKS.md, "ae-train's fixed costs, the closing line without Python, what
  // bounds the rest").
  const cae::cuda::PinnedRange pinned(images, train_images_.bytes());
  AE_CUDA_CHECK(cudaMemcpy(train_images_.get(), images, train_images_.bytes(), cudaMemcpyHostToDevice));
  n_train_ = n;
}

double GpuBackend::train_epoch(const std::vector<int64_t>& order, int batch, float lr,
                               const StepCallback& on_progress) {
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

// Uploads the images of [0, n) chunk by chunk into stage_ and calls fn(images, offset)
// after each upload, in stream order.
template <typename Fn>
void GpuBackend::for_chunks(const uint8_t* images, int64_t n, int chunk, Fn fn) {
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

double GpuBackend::eval_loss(const uint8_t* images, int64_t n, int batch) {
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

void GpuBackend::reconstruct(const uint8_t* images, int64_t n, float* out) {
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

// The encoder over chunks of `chunk` images (encode_chunk), two in flight: chunk c runs
// through the encoder into its slot of latent_dev_, then send(slot, codes, b) enqueues the copies of
// what the host needs into pinned_[slot] (slot_bytes each); meanwhile the host waits
// for chunk c−1 and hands it to take(slot, first image, b, its codes on the device), which
// returns false to stop: no later chunk is encoded (the codes it was given stay intact).
// Returns with the stream idle: no copy into the pinned slots outlives the call.
template <typename Send, typename Take>
void GpuBackend::encode_chunks(const uint8_t* images, int64_t n, int chunk, size_t slot_bytes, Send send, Take take) {
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

// Chunks of images go up, through the encoder, and come back through two pinned
// buffers: while the GPU encodes chunk c, the host copies chunk c−1 into `latent`.
void GpuBackend::encode(const uint8_t* images, int64_t n, int batch, float* latent) {
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
HalfFault GpuBackend::encode_halves(const uint8_t* images, int64_t n, int batch, cae::Half* latent) {
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

// The step's tensors for `batch` images (the plan sized for it); graphs captured with the
// old pointers go.
void GpuBackend::ensure_capacity(int batch) {
  if (batch <= cap_) return;
  drop_graphs();
  plan_ = std::make_unique<Plan>(make_plan(arch_, batch, dt_));
  bufs_.allocate(*plan_, batch, stream_);
  cap_ = batch;
}

// Each side branch's weight-gradient workspace, large enough for every gradient of the
// branch at `batch` images (the split count, so the size, depends on the batch).
void GpuBackend::ensure_workspaces(int batch) {
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

void GpuBackend::upload_order(const std::vector<int64_t>& order) {
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

void GpuBackend::set_lr(float lr) {
  lr_host_ = lr;
  AE_CUDA_CHECK(cudaMemcpyAsync(lr_.get(), &lr_host_, sizeof(float), cudaMemcpyHostToDevice, stream_));
}

// The loss sum so far (over every rank of a group: a collective, which every rank calls
// at the same points).
double GpuBackend::read_loss() {
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
bool GpuBackend::any_rank(bool flag) {
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
void GpuBackend::empty_shard_step() {
  AE_CUDA_CHECK(cudaMemsetAsync(grad_.get(), 0, grad_.bytes(), stream_));
  for (const auto& r : reduce_buckets()) group_->all_reduce_sum(grad_.get() + r.first, size_t(r.second), stream_);
  optimizer_step(stream_);
  advance_step(pos_.get(), step_.get(), 0, stream_);  // the step counter only
}

// The per-layer gradient ranges in the order the step all-reduces them (backward order).
std::vector<std::pair<int64_t, int64_t>> GpuBackend::reduce_buckets() const {
  std::vector<std::pair<int64_t, int64_t>> b;
  for (int l = int(plan_->layers.size()) - 1; l >= 0; --l) {
    const ConvLayer& c = plan_->layers[size_t(l)].conv;
    b.push_back({c.weight_offset, c.bias_offset + c.out - c.weight_offset});
  }
  return b;
}

}  // namespace ae::cuda

namespace ae {

std::unique_ptr<AeBackend> make_gpu_backend(const Architecture& arch, const OptimizerConfig& opt, Precision precision) {
  return std::make_unique<cuda::GpuBackend>(arch, opt, precision);
}

std::unique_ptr<AeBackend> make_gpu_backend(const Architecture& arch, const OptimizerConfig& opt, Precision precision,
                                            const DataParallelGroup& group) {
  return std::make_unique<cuda::GpuBackend>(arch, opt, precision, &group);
}

}  // namespace ae
