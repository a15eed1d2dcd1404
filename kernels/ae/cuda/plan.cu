// make_plan: the GPU backend's per-layer plan from the Architecture (see plan.h).
#include "kernels/ae/cuda/plan.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "common/cuda_check.cuh"

namespace ae::cuda {
namespace {

// Each packed matrix starts on its own 256-byte boundary (the GEMMs read 16-byte chunks).
constexpr size_t kPackAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kPackAlign - 1) / kPackAlign * kPackAlign; }

const char* shape_tag(ConvShape s) {
  switch (s) {
    case ConvShape::up2_parity: return " (up2 parity)";
    case ConvShape::up2_subpixel: return " (sub-pixel)";
    case ConvShape::down2_4x4: return " (4x4 s2)";
    default: return "";
  }
}

}  // namespace

// Packed weight rows are read 128 bytes per pipeline stage (64 bf16 / 32 fp32): the
// reduction length is padded to a multiple of 64 elements, which serves both.
int packed_kpad(int taps, int pitch) { return (taps * pitch + 63) / 64 * 64; }

// The sub-pixel form gathers each source pixel once for all four parities; it pays where
// one parity's channels would leave a 16-wide tile mostly padding (ops.cuh).
ConvShape up2_forward_shape(int out_channels, bool output_layer) {
  return output_layer && out_channels <= 4 ? ConvShape::up2_subpixel : ConvShape::up2_parity;
}

// The folded output gradient of an up2 layer is worth it when its 9·K columns are few:
// then the weight gradient is one plain GEMM on the low-resolution grid (the output layer,
// K = C); with many output channels the per-parity 2×2-patch form reads less.
constexpr int kFoldMaxColumns = 128;
bool up2_wgrad_folds(int out_channels) { return 9 * out_channels <= kFoldMaxColumns; }

Plan make_plan(const Architecture& arch, int batch, DType dtype) {
  if (arch.input_channels() > 7)
    throw std::invalid_argument("the GPU backend supports up to 7 input channels; this model has " +
                                std::to_string(arch.input_channels()) + " (use --device cpu)");
  if (batch <= 0) throw std::invalid_argument("make_plan: batch must be positive");
  Plan plan(arch);
  plan.dtype = dtype;
  plan.batch = batch;
  const int k = arch.depth(), L = arch.num_convs(), C = arch.input_channels();
  auto tensor = [&](const std::string& name, int h, int w, int channels, int pitch, bool picks = false) {
    TensorSpec t;
    t.name = name;
    t.H = h;
    t.W = w;
    t.channels = channels;
    t.pitch = pitch;
    t.picks = picks;
    plan.tensors.push_back(t);
    return int(plan.tensors.size()) - 1;
  };
  auto pack = [&](PackKind kind, const ConvLayer& c, int kpad, int pitch) {
    PackedWeights p;
    p.kind = kind;
    p.weight_offset = c.weight_offset;
    p.K = c.out;
    p.C = c.in;
    p.kpad = kpad;
    p.pitch = pitch;
    plan.packs.push_back(p);
    return int(plan.packs.size()) - 1;
  };

  // ---- tensors: the im2col of the input; per layer its output (after ReLU/pool), the
  // pool's picks, the gradient of its pre-activation, the fold of that gradient.
  plan.col_pitch = im2col_pitch(C);
  plan.col = tensor("input im2col", arch.height(), arch.width(), 9 * C + 1, plan.col_pitch);
  std::vector<int> act(size_t(L), -1), picks(size_t(L), -1), grad(size_t(L), -1), fold(size_t(L), -1);
  for (int l = 0; l < L; ++l) {
    const ConvLayer& c = arch.conv(l);
    const int po = channel_pitch(c.out);
    if (c.pool) {
      act[size_t(l)] = tensor(c.name + " out (pooled)", c.H / 2, c.W / 2, c.out, po);
      picks[size_t(l)] = tensor(c.name + " pool picks", c.H / 2, c.W / 2, c.out, po, true);
      // The first layer's gradient stays at the pooled grid: its weight gradient unpools it.
      grad[size_t(l)] = l == 0 ? tensor(c.name + " grad (pooled)", c.H / 2, c.W / 2, c.out, po)
                               : tensor(c.name + " grad", c.H, c.W, c.out, po);
    } else if (l < L - 1) {
      act[size_t(l)] = tensor(c.name + " out", c.H, c.W, c.out, po);
      grad[size_t(l)] = tensor(c.name + " grad", c.H, c.W, c.out, po);
    } else {
      grad[size_t(l)] = tensor(c.name + " grad (loss)", c.H, c.W, c.out, po);
    }
    if (c.upsample && up2_wgrad_folds(c.out))
      fold[size_t(l)] = tensor(c.name + " grad folded", c.H / 2, c.W / 2, 9 * c.out, channel_pitch(9 * c.out));
  }
  plan.loss_grad = grad[size_t(L - 1)];
  plan.latent_layer = k - 1;

  for (int l = 0; l < L; ++l) {
    const ConvLayer& c = arch.conv(l);
    LayerPlan lp;
    lp.index = l;
    lp.conv = c;
    lp.encoder = l < k;
    lp.output = l == L - 1;
    lp.flops_per_image = c.flops(1);
    const int pi = l == 0 ? plan.col_pitch : channel_pitch(c.in), po = channel_pitch(c.out);
    const int src = l == 0 ? plan.col : act[size_t(l - 1)];
    const int sh = c.upsample ? c.H / 2 : c.H, sw = c.upsample ? c.W / 2 : c.W;  // the source's size

    // ---- forward
    ConvOp& f = lp.forward;
    f.src = src;
    f.args.Hs = sh;
    f.args.Ws = sw;
    f.args.Cs = pi;
    f.args.N = c.out;
    f.args.relu = c.relu;
    f.bias_offset = c.bias_offset;
    std::string epi;
    if (l == 0) {  // on the im2col: one tap of 9·C + 1 columns
      f.args.shape = ConvShape::point1x1;
      f.args.Kpad = packed_kpad(1, pi);
      f.pack = pack(PackKind::fwd_im2col, c, f.args.Kpad, c.in);
    } else if (!c.upsample) {
      f.args.shape = ConvShape::same3x3;
      f.args.Kpad = packed_kpad(9, pi);
      f.pack = pack(PackKind::fwd3, c, f.args.Kpad, pi);
    } else if (up2_forward_shape(c.out, lp.output) == ConvShape::up2_subpixel) {
      f.args.shape = ConvShape::up2_subpixel;
      f.args.Kpad = packed_kpad(9, pi);
      f.pack = pack(PackKind::fwd_up2_subpixel, c, f.args.Kpad, pi);
    } else {
      f.args.shape = ConvShape::up2_parity;
      f.args.Kpad = packed_kpad(4, pi);
      f.pack = pack(PackKind::fwd_up2_parity, c, f.args.Kpad, pi);
    }
    if (c.pool) {
      f.args.epilogue = ConvEpilogue::pool;
      f.out = act[size_t(l)];
      f.picks_out = picks[size_t(l)];
      epi = " +relu+pool";
    } else if (lp.output) {
      f.args.epilogue = ConvEpilogue::loss;
      f.out = grad[size_t(l)];  // the caller leaves it null when no gradient is wanted
      epi = " +loss";
    } else {
      f.args.epilogue = ConvEpilogue::store;
      f.out = act[size_t(l)];
      epi = c.relu ? " +relu" : "";
    }
    f.args.ldo = po;
    lp.forward_name = c.name + " fwd" + shape_tag(f.args.shape) + epi;

    // ---- input gradient, landing as the gradient of the previous layer's pre-activation
    if (l > 0) {
      lp.has_input_grad = true;
      ConvOp& g = lp.input_grad;
      const ConvLayer& prev = arch.conv(l - 1);
      g.src = grad[size_t(l)];
      g.args.Hs = c.H;
      g.args.Ws = c.W;
      g.args.Cs = po;
      g.args.N = c.in;
      g.aux = act[size_t(l - 1)];
      g.args.ld_aux = pi;
      g.out = grad[size_t(l - 1)];
      g.args.ldo = pi;
      if (c.upsample) {  // "3×3 transposed, then sum each 2×2 block": 4×4 stride 2
        g.args.shape = ConvShape::down2_4x4;
        g.args.Kpad = packed_kpad(16, po);
        g.pack = pack(PackKind::bwd_down2_4x4, c, g.args.Kpad, po);
        g.args.epilogue = ConvEpilogue::mask;
        epi = "";
      } else {
        g.args.shape = ConvShape::same3x3;
        g.args.Kpad = packed_kpad(9, po);
        g.pack = pack(PackKind::bwd3, c, g.args.Kpad, po);
        if (!prev.pool) {
          g.args.epilogue = ConvEpilogue::mask;
          epi = " +mask";
        } else if (l - 1 == 0) {  // the first layer unpools in its weight gradient
          g.args.epilogue = ConvEpilogue::mask;
          epi = " +mask";
        } else {
          g.args.epilogue = ConvEpilogue::unpool_mask;
          g.picks_in = picks[size_t(l - 1)];
          epi = " +unpool";
        }
      }
      lp.input_grad_name = c.name + " bwd-data" + shape_tag(g.args.shape) + epi;
    }

    // ---- weight gradient: a GEMM over pixels; the operand gathered as a patch is the one
    // with fewer channels (docs/GPU.md)
    WgradOp& w = lp.wgrad;
    w.weight_offset = c.weight_offset;
    w.bias_offset = c.bias_offset;
    w.scatter.K = c.out;
    w.scatter.C = c.in;
    w.bias_src = grad[size_t(l)];
    w.bias_rows = int64_t(c.H) * c.W;
    w.bias_ld = po;
    w.bias_cols = c.out;
    auto pm = [](int src_h, int src_w, int pitch, PixelMatrix::Kind kind) {
      PixelMatrix m;
      m.Hs = src_h;
      m.Ws = src_w;
      m.Cs = pitch;
      m.kind = kind;
      return m;
    };
    std::string how;
    if (l == 0) {
      // dY (pooled grid, unpooled by the picks inside the GEMM) × the im2col, whose
      // constant column 9·C gives the bias gradient
      w.a = pm(c.H / 2, c.W / 2, po, PixelMatrix::unpooled);
      w.a_src = grad[0];
      w.a_picks = picks[0];
      w.b = pm(c.H, c.W, pi, PixelMatrix::plain);
      w.b_src = plan.col;
      w.grid_h = c.H;
      w.grid_w = c.W;
      w.scatter.mode = WgradScatter::out_by_patch;
      w.scatter.im2col = true;
      w.scatter.bias_column = 9 * c.in;
      w.scatter.Cs = pi;
      w.bias_src = -1;
      how = " +unpool";
    } else if (!c.upsample) {
      w.grid_h = c.H;
      w.grid_w = c.W;
      if (pi <= po) {  // dY × the 3×3 patch of x
        w.a = pm(c.H, c.W, po, PixelMatrix::plain);
        w.a_src = grad[size_t(l)];
        w.b = pm(c.H, c.W, pi, PixelMatrix::patch3);
        w.b_src = src;
        w.scatter.mode = WgradScatter::out_by_patch;
        w.scatter.Cs = pi;
      } else {  // x × the mirrored 3×3 patch of dY
        w.a = pm(c.H, c.W, pi, PixelMatrix::plain);
        w.a_src = src;
        w.b = pm(c.H, c.W, po, PixelMatrix::patch3_flipped);
        w.b_src = grad[size_t(l)];
        w.scatter.mode = WgradScatter::in_by_flipped_patch;
        w.scatter.Cs = po;
      }
    } else if (fold[size_t(l)] >= 0) {  // x × dY folded onto x's grid
      const TensorSpec& ft = plan.tensors[size_t(fold[size_t(l)])];
      w.fold_src = grad[size_t(l)];
      w.fold_dst = fold[size_t(l)];
      w.fold_K = c.out;
      w.fold_h = sh;
      w.fold_w = sw;
      w.fold_ldd = po;
      w.fold_ldg = ft.pitch;
      w.a = pm(sh, sw, pi, PixelMatrix::plain);
      w.a_src = src;
      w.b = pm(sh, sw, ft.pitch, PixelMatrix::plain);
      w.b_src = fold[size_t(l)];
      w.grid_h = sh;
      w.grid_w = sw;
      w.scatter.mode = WgradScatter::in_by_flipped_patch;
      w.scatter.Cs = c.out;  // the fold's columns are tap·K + k
      how = " (fold)";
    } else {  // per output parity: dY at (2y+dy, 2x+dx) × the 2×2 patch of x
      w.a = pm(c.H, c.W, po, PixelMatrix::plain);
      w.a.parity_subsample = true;
      w.a_src = grad[size_t(l)];
      w.b = pm(sh, sw, pi, PixelMatrix::patch2_parity);
      w.b_src = src;
      w.grid_h = sh;
      w.grid_w = sw;
      w.parities = 4;
      w.scatter.mode = WgradScatter::out_by_parity_patch;
      w.scatter.Cs = pi;
    }
    lp.wgrad_name = c.name + " wgrad" + how + " +bias";
    plan.layers.push_back(lp);
  }

  // ---- graph branches: the two largest weight gradients on a side branch of their own,
  // the others on the second one (they stay in order within a branch, sharing its
  // workspaces); see docs/GPU.md for why two
  std::vector<int> by_flops(static_cast<size_t>(L));
  std::iota(by_flops.begin(), by_flops.end(), 0);
  std::stable_sort(by_flops.begin(), by_flops.end(), [&](int x, int y) {
    return plan.layers[size_t(x)].flops_per_image > plan.layers[size_t(y)].flops_per_image;
  });
  for (int i = 0; i < L; ++i) plan.layers[size_t(by_flops[size_t(i)])].wgrad.branch = i < 2 ? 1 : 0;
  return plan;
}

size_t Plan::workspace_floats(int branch, int images) const {
  size_t most = 0;
  for (const LayerPlan& lp : layers)
    if (lp.wgrad.branch == branch) most = std::max(most, lp.wgrad.gemm_plan(images, dtype).workspace_floats());
  return most;
}

size_t Plan::bias_work_floats(int branch) const {
  size_t most = 0;
  for (const LayerPlan& lp : layers)
    if (lp.wgrad.branch == branch && lp.wgrad.bias_src >= 0) most = std::max(most, bias_grad_work_floats(lp.wgrad.bias_ld));
  return most;
}

// ---- binding -------------------------------------------------------------------------------
ConvArgs ConvOp::bind(const StepBuffers& bufs, const PackedSet& packs, const float* params, int images) const {
  ConvArgs a = args;
  a.images = images;
  a.src = bufs.get(src);
  a.out = bufs.get(out);
  a.aux = bufs.get(aux);
  a.argmax_out = static_cast<uint8_t*>(bufs.get(picks_out));
  a.argmax_in = static_cast<const uint8_t*>(bufs.get(picks_in));
  a.weights = packs.get(pack);
  a.bias = bias_offset >= 0 ? params + bias_offset : nullptr;
  return a;
}

void WgradOp::run(const StepBuffers& bufs, int images, float* grad, const WgradPlan& plan, float* workspace,
                  float* bias_work, DType t, cudaStream_t stream) const {
  if (fold_dst >= 0)
    up2_fold_output_grad(bufs.get(fold_src), fold_ldd, fold_K, images, fold_h, fold_w, bufs.get(fold_dst), fold_ldg, t,
                         stream);
  PixelMatrix A = a, B = b;
  A.src = bufs.get(a_src);
  A.argmax = static_cast<const uint8_t*>(bufs.get(a_picks));
  B.src = bufs.get(b_src);
  wgrad_igemm(A, B, plan, workspace, t, stream);
  WgradScatter s = scatter;
  s.weight_grad = grad + weight_offset;
  if (s.bias_column >= 0) s.bias_grad = grad + bias_offset;
  wgrad_reduce(workspace, plan, s, stream);
  if (bias_src >= 0)
    bias_grad(bufs.get(bias_src), int64_t(images) * bias_rows, bias_ld, bias_cols, bias_work, grad + bias_offset, t,
              stream);
}

void StepBuffers::allocate(const Plan& plan, int images, cudaStream_t stream) {
  bufs_.clear();
  ptrs_.clear();
  bufs_.resize(plan.tensors.size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const size_t bytes = plan.tensors[i].bytes(images, plan.dtype);
    bufs_[i].resize(bytes);
    // Kernels never write some padding channels (pool and mask epilogues stop at N): they
    // must read as zero, as the packed weights' padding does.
    AE_CUDA_CHECK(cudaMemsetAsync(bufs_[i].get(), 0, bytes, stream));
    ptrs_.push_back(bufs_[i].get());
  }
  images_ = images;
}

void PackedSet::allocate(const Plan& plan, cudaStream_t stream) {
  const size_t es = dtype_bytes(plan.dtype);
  size_t total = 0;
  for (const PackedWeights& p : plan.packs) total += aligned(size_t(p.count()) * es);
  storage_.release();
  storage_.resize(total);
  AE_CUDA_CHECK(cudaMemsetAsync(storage_.get(), 0, total, stream));  // the padding stays zero
  ptrs_.clear();
  lists_.clear();
  size_t off = 0;
  for (const PackedWeights& spec : plan.packs) {
    PackedWeights p = spec;
    p.dst = storage_.get() + off;
    off += aligned(size_t(p.count()) * es);
    ptrs_.push_back(p.dst);
    if (lists_.empty() || lists_.back().count == PackList::kMax) lists_.emplace_back();
    lists_.back().add(p);
  }
}

void PackedSet::pack(const float* params, DType t, cudaStream_t stream) const {
  for (const PackList& list : lists_) pack_weights(params, list, t, stream);
}

}  // namespace ae::cuda
