// The per-layer plan of the GPU backend: everything a training step, an encode or an
// evaluation needs per convolution, derived from the Architecture alone (make_plan).
//
// A plan is host data: tensor shapes, packed-weight layouts and, per layer, the three
// GEMMs of kernels/ae/cuda/ops.cuh with their operands named by tensor / pack index
// instead of pointers. StepBuffers and PackedSet allocate what the plan names; bind() turns
// an operation into the ConvArgs / PixelMatrix the kernels take. The backend
// (backend_gpu.cu) and the tests (tests/gpu/test_plan_gpu.cu) run the same bound operations.
//
// The data flow of one step for k encoder blocks (layer l = convs()[l]; docs/GPU.md):
//   input  uint8 NCHW ─ im2col_input ─▶ col  [B·H·W][im2col_pitch(C)]  (column 9·C = 1)
//   enc 0  point1x1 on col, bias+ReLU+2×2 max pool ─▶ act[0] (H/2·W/2) + pick[0]
//   enc i  same3x3, bias+ReLU+pool                 ─▶ act[i]          + pick[i]
//          (the last one also writes the latent codes, fp32 NCHW, for encode)
//   dec k  same3x3 on act[k−1], bias+ReLU          ─▶ act[k]
//   dec l  up2_parity (upsample ×2 + conv), bias+ReLU ─▶ act[l]
//   last   up2_subpixel (C ≤ 4) or up2_parity, bias + MSE loss ─▶ grad[last] (d loss/d out)
// and backwards, layer l = 2k … 1, grad[l] being the gradient of layer l's pre-activation:
//   input gradient  (up layers) down2_4x4 of grad[l] × ReLU mask of act[l−1] ─▶ grad[l−1]
//                   (same3x3 layers) bwd 3×3 of grad[l], then × mask of the pooled act[l−1]
//                   and max-unpool by pick[l−1] ─▶ grad[l−1] at the pre-pool grid — except
//                   into encoder layer 0, whose gradient stays at the pooled grid (mask
//                   only): its weight gradient unpools it as it reads it.
//   weight gradient a GEMM over pixels of grad[l] and act[l−1] (one of them as a patch),
//                   on one of two side branches of the step graph.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_check.cuh"
#include "kernels/ae/backend.h"
#include "kernels/ae/model.h"
#include "kernels/ae/cuda/ops.cuh"

namespace ae::cuda {

// One NHWC device tensor of a step, per image: H×W pixels of `pitch` elements (channels
// `channels` real, the rest zero). `picks`: one byte per element (a pool's argmax).
struct TensorSpec {
  std::string name;
  int H = 0, W = 0, channels = 0, pitch = 0;
  bool picks = false;
  int64_t elements(int images) const { return int64_t(images) * H * W * pitch; }
  size_t bytes(int images, DType t) const { return size_t(elements(images)) * (picks ? 1 : dtype_bytes(t)); }
};

// Where a bound operation's pointers come from.
class StepBuffers;
class PackedSet;

// One implicit-GEMM convolution (conv_igemm). `args` holds every field that does not depend
// on the batch; the pointers come from the tensor / pack indices (−1: none). The loss
// epilogue's targets, loss sum and gradient scale are the caller's (they depend on where the
// images are), as are out_nchw (latent codes, reconstruction).
struct ConvOp {
  ConvArgs args;
  int src = -1, out = -1, aux = -1, picks_out = -1, picks_in = -1;
  int pack = -1;             // the packed weights
  int64_t bias_offset = -1;  // the bias added (into the flat params), −1: none
  ConvArgs bind(const StepBuffers& bufs, const PackedSet& packs, const float* params, int images) const;
};

// One weight gradient: optionally the fold of an up2 layer's output gradient, the GEMM over
// pixels, the scatter into [K][C][3][3], and the bias gradient (column sums of `bias_src`,
// or the im2col's constant column for the first layer).
struct WgradOp {
  PixelMatrix a, b;  // src/argmax pointers left null: a_src, b_src, a_picks
  int a_src = -1, b_src = -1, a_picks = -1;
  int grid_h = 0, grid_w = 0, parities = 1;
  WgradScatter scatter;  // weight_grad / bias_grad pointers left null
  int64_t weight_offset = 0, bias_offset = 0;
  // fold (up2_fold_output_grad) of tensor fold_src into fold_dst first, when fold_dst ≥ 0
  int fold_src = -1, fold_dst = -1, fold_K = 0, fold_h = 0, fold_w = 0, fold_ldd = 0, fold_ldg = 0;
  // bias gradient: column sums of bias_src (rows = images · bias_rows), or none (−1)
  int bias_src = -1;
  int bias_ld = 0, bias_cols = 0;
  int64_t bias_rows = 0;  // per image
  int branch = 0;         // side branch of the step graph

  WgradPlan gemm_plan(int images, DType t) const {
    return plan_wgrad(a, b, images, grid_h, grid_w, parities, t);
  }
  // fold, GEMM, scatter, bias: into grad (the flat fp32 gradient). workspace: gemm_plan's
  // workspace_floats(); bias_work: bias_grad_work_floats(bias_ld).
  void run(const StepBuffers& bufs, int images, float* grad, const WgradPlan& plan, float* workspace, float* bias_work,
           DType t, cudaStream_t stream) const;
};

// One convolution of the model and its three GEMMs.
struct LayerPlan {
  int index = 0;
  ConvLayer conv;
  bool encoder = false, output = false;  // output: the decoder's last layer (the loss)
  ConvOp forward;
  bool has_input_grad = false;  // every layer but the first
  ConvOp input_grad;
  WgradOp wgrad;
  double flops_per_image = 0;  // of the forward convolution (and of each backward GEMM)
  std::string forward_name, input_grad_name, wgrad_name;  // stage names for the profile
};

struct Plan {
  Architecture arch;
  DType dtype = DType::f32;
  int batch = 0;  // the capacity the tensors are sized for
  std::vector<TensorSpec> tensors;
  std::vector<PackedWeights> packs;  // dst pointers left null (PackedSet)
  std::vector<LayerPlan> layers;     // arch.convs() order
  int col = -1;                      // the input's im2col
  int col_pitch = 0;
  int latent_layer = -1;             // the encoder layer that writes the latent codes
  int loss_grad = -1;                // the output gradient (the loss epilogue's out)
  static constexpr int kBranches = 2;

  explicit Plan(const Architecture& a) : arch(a) {}
  int depth() const { return arch.depth(); }
  // The largest weight-gradient workspace / bias work of each branch, for `images`.
  size_t workspace_floats(int branch, int images) const;
  size_t bias_work_floats(int branch) const;
};

// The per-convolution decisions make_plan takes, by name, so that the tests' twins
// (tests/gpu/support/layer_twins.cuh) take the same ones:
//   packed_kpad        the reduction length of packed weights: taps·pitch rounded up to 64
//   up2_forward_shape  "upsample ×2, then 3×3" forward: up2_subpixel for the output layer
//                      with at most 4 channels, else up2_parity
//   up2_wgrad_folds    that layer's weight gradient folds the output gradient
//                      (up2_fold_output_grad) when 9·K ≤ 128, else per-parity patches
int packed_kpad(int taps, int pitch);
ConvShape up2_forward_shape(int out_channels, bool output_layer);
bool up2_wgrad_folds(int out_channels);

// Throws std::invalid_argument when the GPU backend cannot run `arch` (more than 7 input
// channels).
Plan make_plan(const Architecture& arch, int batch, DType dtype);

// The device tensors of a plan for up to `images` images. Padding channels are zeroed once
// here; every kernel writes its pad as zero (or never touches it) afterwards.
class StepBuffers {
 public:
  void allocate(const Plan& plan, int images, cudaStream_t stream);
  void* get(int id) const { return id < 0 ? nullptr : ptrs_.at(size_t(id)); }
  int capacity() const { return images_; }

 private:
  std::vector<cae::cuda::DeviceBuffer<char>> bufs_;
  std::vector<void*> ptrs_;
  int images_ = 0;
};

// The packed weight copies of a plan, refreshed from the fp32 master params by pack().
class PackedSet {
 public:
  void allocate(const Plan& plan, cudaStream_t stream);
  void pack(const float* params, DType t, cudaStream_t stream) const;
  void* get(int id) const { return id < 0 ? nullptr : ptrs_.at(size_t(id)); }

 private:
  cae::cuda::DeviceBuffer<char> storage_;
  std::vector<void*> ptrs_;
  std::vector<PackList> lists_;  // PackList holds at most PackList::kMax items
};

}  // namespace ae::cuda
