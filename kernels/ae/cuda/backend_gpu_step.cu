// The GPU backend's training step (backend_gpu.cuh): the plan's operations bound to the
// backend's buffers, the step as named stages, their capture into a CUDA graph over three
// streams, and the step profiler's view of the same stages.
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/ae/cuda/backend_gpu.cuh"
#include "kernels/ae/cuda/nccl_group.h"
#include "kernels/ae/cuda/ops.cuh"

namespace ae::cuda {

// Which stream of the captured graph a stage runs on. The weight gradients form side
// branches: each one needs only what the forward pass and the previous input gradient wrote,
// and nothing on the main chain reads what it writes, so the graph lets it run beside the
// next input-gradient kernel instead of after it.
enum class GpuBackend::Lane { main, side, join };

struct GpuBackend::Stage {
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

void GpuBackend::input_im2col(const uint8_t* images, const int* order, const int* pos, int B, cudaStream_t s,
                              int ahead, const int* order_end) {
  im2col_input(images, order, pos, B, arch_.input_channels(), arch_.height(), arch_.width(), bufs_.get(plan_->col),
               plan_->col_pitch, dt_, s, ahead, order_end);
}

void GpuBackend::forward_layer(const LayerPlan& lp, int B, const ForwardIo& io, cudaStream_t s) {
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
void GpuBackend::forward(int B, const ForwardIo& io, int last, cudaStream_t s) {
  for (int l = 0; l <= last; ++l) forward_layer(plan_->layers[size_t(l)], B, io, s);
}

// Gradient w.r.t. layer lp's input, fused with the backward of whatever produced that
// input (upsample + ReLU, or ReLU + max pool), so it lands as the gradient of the
// previous convolution's pre-activation.
void GpuBackend::input_grad_layer(const LayerPlan& lp, int B, TileChoice tiles, cudaStream_t s) {
  ConvArgs a = lp.input_grad.bind(bufs_, packs_, params_.get(), B);
  a.tile = conv_tile(lp, true, a, B, tiles, s);
  conv_igemm(a, dt_, s);
}

// The tile a convolution runs with at batch B (TileChoice). Timed: the fastest of the
// candidates (tune_conv_tile, on this step's own buffers, which the step then overwrites)
// at the smallest batch of B to 4·B timed before, else timed now at B; graph_for has every
// one timed before its capture. Borrowed: the tile timed at the nearest batch — the
// smallest larger one, else the largest smaller one —, the rule's where none was timed.
ConvTile GpuBackend::conv_tile(const LayerPlan& lp, bool input_grad, const ConvArgs& a, int B, TileChoice choice,
                               cudaStream_t s) {
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

void GpuBackend::tune_conv_tiles(int B) {
  for (const LayerPlan& lp : plan_->layers) {
    if (!lp.output)
      conv_tile(lp, false, lp.forward.bind(bufs_, packs_, params_.get(), B), B, TileChoice::timed, stream_);
    if (lp.has_input_grad)
      conv_tile(lp, true, lp.input_grad.bind(bufs_, packs_, params_.get(), B), B, TileChoice::timed, stream_);
  }
}

// The optimizer on the (all-reduced) gradient, then the packed weight copies.
void GpuBackend::optimizer_step(cudaStream_t s) {
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
std::vector<GpuBackend::Stage> GpuBackend::step_stages(int B, int G, TileChoice tiles) {
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
// every GEMM fills the GPU and the branches' longer work needs it instead (the priorities
// were slower there, so it keeps one; docs/GPU.md, "No launch overhead, no host
// synchronisation").
bool GpuBackend::main_chain_first(int B) const {
  // the smallest row grid of a main-chain GEMM is the latent's
  const int64_t grid = int64_t(arch_.latent_height()) * arch_.latent_width();
  return (int64_t(B) * grid + 63) / 64 < sm_count_;
}

// In a group, each layer's gradient is all-reduced on the communication stream as soon as
// its weight-gradient kernel is done, while the backward pass goes on (bucket = layer;
// one stream keeps the collectives in the same order on every rank). `tiles`: timed for
// the full batch, which every step but an epoch's last runs; borrowed for that last one.
cudaGraphExec_t GpuBackend::graph_for(int B, int G, TileChoice tiles) {
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

void GpuBackend::drop_graphs() {
  if (!graphs_.empty() && stream_) cudaStreamSynchronize(stream_);
  for (auto& g : graphs_) cudaGraphExecDestroy(g.second);
  graphs_.clear();
}

// ---- the step profiler's view ----

std::vector<GpuBackend::StepStage> GpuBackend::stages_of_step(int batch) {
  if (n_train_ == 0) throw std::logic_error("stages_of_step: set_train_images() first");
  if (n_train_ < batch) throw std::invalid_argument("stages_of_step: fewer training images than the batch");
  if (group_) throw std::logic_error("stages_of_step: a group's step all-reduces inside its graph; one GPU only");
  // Two batches' worth of order, so that the step's im2col of the next batch has a whole
  // batch to gather, as inside an epoch; the first batch's im2col is built here, as
  // train_epoch builds it before its first step.
  std::vector<int64_t> order(static_cast<size_t>(2 * batch));
  for (int i = 0; i < 2 * batch; ++i) order[size_t(i)] = i % batch;
  upload_order(order);
  ensure_capacity(batch);
  ensure_workspaces(batch);
  AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_));
  input_im2col(train_images_.get(), order_.get(), pos_.get(), batch, stream_);
  std::vector<StepStage> out;
  for (Stage& s : step_stages(batch, batch)) out.push_back({s.name, s.flops, std::move(s.run)});
  return out;
}

void GpuBackend::rewind_step() { AE_CUDA_CHECK(cudaMemsetAsync(pos_.get(), 0, sizeof(int), stream_)); }

void GpuBackend::replay_step(int batch) { AE_CUDA_CHECK(cudaGraphLaunch(graph_for(batch, batch), stream_)); }

std::string GpuBackend::conv_tiles() const {
  std::string out;
  for (const auto& [key, tile] : conv_tiles_) {
    const auto& [layer, input_grad, batch] = key;
    out += (out.empty() ? "" : ", ") + std::string("layer ") + std::to_string(layer) + (input_grad ? " bwd " : " fwd ") +
           conv_tile_name(tile) + " (batch " + std::to_string(batch) + ")";
  }
  return out;
}

}  // namespace ae::cuda
