// The GPU backend of the autoencoder (AeBackend on CUDA) for any Architecture of the family.
// See docs/GPU.md. The tools create it through make_gpu_backend (kernels/ae/backend.h); the
// class is declared here for the step profiler (tests/gpu/support/step_profiler.h), which
// reaches the step only through the public stages_of_step / rewind_step / replay_step.
// backend_gpu.cu: construction, state, the epoch, evaluation and encoding;
// backend_gpu_step.cu: the network's operations, the step's stages and its CUDA graph.
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
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cuda_check.cuh"
#include "kernels/ae/backend.h"
#include "kernels/ae/cuda/plan.h"
#include "kernels/ae/model.h"

namespace ae::cuda {

using cae::cuda::DeviceBuffer;
class NcclGroup;

class GpuBackend : public AeBackend {
 public:
  GpuBackend(const Architecture& arch, const OptimizerConfig& opt, Precision precision,
             const DataParallelGroup* group = nullptr);
  ~GpuBackend() override;

  std::string describe() const override;
  const Architecture& architecture() const override { return arch_; }
  void set_params(const std::vector<float>& p) override;
  std::vector<float> params() const override;
  void set_optimizer_state(const OptimizerState& s) override;
  OptimizerState optimizer_state() const override;
  void set_train_images(const uint8_t* images, int64_t n) override;
  // 128 steps: a fraction of a second of an H200 for the seed model; with 16, each call's
  // order upload and closing loss read left the GPU idle for a measurable share of an fp32
  // epoch at batch 64 (docs/DECISIONS.md, "A GPU trains 128 steps per trainer call, the CPU
  // 16").
  int steps_per_call() const override { return 128; }
  double train_epoch(const std::vector<int64_t>& order, int batch, float lr, const StepCallback& on_progress) override;
  double eval_loss(const uint8_t* images, int64_t n, int batch) override;
  void reconstruct(const uint8_t* images, int64_t n, float* out) override;
  void encode(const uint8_t* images, int64_t n, int batch, float* latent) override;
  HalfFault encode_halves(const uint8_t* images, int64_t n, int batch, cae::Half* latent) override;
  bool any_rank(bool flag) override;

  // ---- one training step stage by stage, for the step profiler ----
  struct StepStage {
    std::string name;  // LayerPlan::forward_name, …, "input im2col", "optimizer", "advance"
    double flops = 0;  // useful floating-point operations (padding not counted)
    std::function<void(cudaStream_t)> run;
  };
  // The stages of one training step of `batch` images in the order its graph captures them,
  // each to be run alone on stream(); the step reads training images 0..batch−1
  // (set_train_images first, at least `batch`). One GPU only: a group's stages throw.
  std::vector<StepStage> stages_of_step(int batch);
  void rewind_step();           // the next step (stages or replay) starts at image 0 again
  void replay_step(int batch);  // one whole step as train_epoch replays its graph
  cudaStream_t stream() const { return stream_; }  // where stages and replays run
  // The tiles the convolutions were timed to so far, "layer 1 fwd 128x128/3 (batch 64), …".
  std::string conv_tiles() const;

 private:
  // How a convolution's tile is chosen (conv_tile). `timed`: the fastest candidate at this
  // batch, timed once. `borrowed`: the tile timed for the nearest batch, never timed afresh —
  // for work done once an epoch (its last, smaller batch; the samples' reconstruction), where
  // timing every candidate costs more than the best tile wins (docs/BENCHMARKS.md,
  // "ae-train's fixed costs, the closing line without Python, what bounds the rest"). `rule`: the rule's tile (encode: a few dozen chunks of two
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
  enum class Lane;  // which stream of the captured graph a stage runs on
  struct Stage;     // one named stage of the step (backend_gpu_step.cu)
  class PinnedBuffer {  // page-locked host memory that only grows
   public:
    ~PinnedBuffer();
    void resize(size_t bytes);
    void* get() const { return ptr_; }

   private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
  };

  // backend_gpu.cu
  void connect_group();
  void ensure_capacity(int batch);
  void ensure_workspaces(int batch);
  template <typename Send, typename Take>
  void encode_chunks(const uint8_t* images, int64_t n, int chunk, size_t slot_bytes, Send send, Take take);
  template <typename Fn>
  void for_chunks(const uint8_t* images, int64_t n, int chunk, Fn fn);
  void upload_order(const std::vector<int64_t>& order);
  void set_lr(float lr);
  double read_loss();
  void empty_shard_step();
  std::vector<std::pair<int64_t, int64_t>> reduce_buckets() const;
  // backend_gpu_step.cu
  void input_im2col(const uint8_t* images, const int* order, const int* pos, int B, cudaStream_t s, int ahead = 0,
                    const int* order_end = nullptr);
  void forward_layer(const LayerPlan& lp, int B, const ForwardIo& io, cudaStream_t s);
  void forward(int B, const ForwardIo& io, int last, cudaStream_t s);
  void input_grad_layer(const LayerPlan& lp, int B, TileChoice tiles, cudaStream_t s);
  ConvTile conv_tile(const LayerPlan& lp, bool input_grad, const ConvArgs& a, int B, TileChoice choice, cudaStream_t s);
  void tune_conv_tiles(int B);
  void optimizer_step(cudaStream_t s);
  std::vector<Stage> step_stages(int B, int G, TileChoice tiles = TileChoice::timed);
  bool main_chain_first(int B) const;
  cudaGraphExec_t graph_for(int B, int G, TileChoice tiles = TileChoice::timed);
  void drop_graphs();

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
