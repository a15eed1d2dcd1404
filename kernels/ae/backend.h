// The device seam of the autoencoder: one AeBackend per device trains and encodes any
// Architecture (kernels/ae/model.h). The CPU backend (kernels/ae/cpu/backend_cpu.cpp) is
// the reference; the CUDA backend (kernels/ae/cuda/backend_gpu.cu) is checked against it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/half.h"
#include "kernels/ae/model.h"

namespace ae {

struct OptimizerConfig {
  std::string kind = "adam";  // "adam" | "sgd"
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam
  float momentum = 0.0f;                            // sgd
  float weight_decay = 0.0f;                        // L2 added to the gradient (PyTorch semantics)
  float grad_clip = 0.0f;                           // max global L2 norm of the gradient; 0 = off
};

// Everything an optimizer needs to continue bit-identically after --resume.
struct OptimizerState {
  int64_t step = 0;
  std::vector<float> m;  // adam first moment / sgd momentum buffer (param_count, or empty)
  std::vector<float> v;  // adam second moment (param_count, or empty)
};

enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);

// Called during an epoch so the tool can draw progress. GPU backends call it only every
// few steps: reading the loss back is a host synchronisation.
using StepCallback = std::function<void(int64_t images_done, double running_mean_loss)>;

// A code that float16 cannot hold (encode_halves): its index in the [n, latent_dim] codes and
// its value as computed — in the first chunk that has one, its first code that is not finite
// if there is one (a diverged model, whatever the storage), else its first beyond ±65504;
// index -1: every code fits.
struct HalfFault {
  int64_t index = -1;
  float value = 0;
  explicit operator bool() const { return index >= 0; }
};

// Images are uint8 [n, C, H, W] of the backend's architecture, normalised as pixels/255.
class AeBackend {
 public:
  virtual ~AeBackend() = default;
  virtual std::string describe() const = 0;  // e.g. "cpu, 2 threads" or "NVIDIA H100, bf16"
  virtual const Architecture& architecture() const = 0;

  virtual void set_params(const std::vector<float>& params) = 0;  // architecture().param_count() values
  virtual std::vector<float> params() const = 0;
  virtual void set_optimizer_state(const OptimizerState& s) = 0;
  virtual OptimizerState optimizer_state() const = 0;

  // The training images stay resident (on the GPU: as uint8, normalised on the fly).
  virtual void set_train_images(const uint8_t* images, int64_t n) = 0;
  // One epoch over train images order[0..n) in batches of `batch` (the last may be
  // smaller). Returns the mean over images of the per-image MSE (i.e. the batch losses
  // weighted by batch size). One optimizer step per batch, at learning rate `lr`.
  virtual double train_epoch(const std::vector<int64_t>& order, int batch, float lr,
                             const StepCallback& on_progress) = 0;
  // The optimizer steps a trainer gives one train_epoch call; a stop is honoured between
  // calls, and the epoch's loss is summed per call, so the number is fixed per backend kind
  // (a resumed run cuts the epoch where an uninterrupted one did). The CPU's steps take
  // seconds: few per call keep a stop prompt. A GPU call ends in a host synchronisation,
  // the GPU idle until the next call's first step: many per call.
  virtual int steps_per_call() const { return 16; }
  // Mean MSE over images (no training), in batches.
  virtual double eval_loss(const uint8_t* images, int64_t n, int batch) = 0;
  // Decoder output (pixels/255 scale) for n images: [n, C, H, W].
  virtual void reconstruct(const uint8_t* images, int64_t n, float* out) = 0;
  // Latent codes [n, latent_dim], C,H,W order.
  virtual void encode(const uint8_t* images, int64_t n, int batch, float* latent) = 0;
  // encode()'s codes rounded to float16 (nearest, ties to even), as a features file stores
  // them, with the first code float16 cannot hold (not finite, or beyond ±65504) found on the
  // way; the codes after it are unspecified. This one encodes into floats a chunk at a time
  // and rounds them on the host; the GPU backend rounds and checks on the GPU, so its codes
  // cross the bus and the host once, as halves.
  virtual HalfFault encode_halves(const uint8_t* images, int64_t n, int batch, cae::Half* latent);
  // True when `flag` is true on any rank of this backend's data-parallel group, so that
  // every rank stops at the same step when only some received a signal. A collective: in
  // a group every rank calls it at the same points. One process: `flag` itself.
  virtual bool any_rank(bool flag) { return flag; }
};

// threads <= 0: OpenMP's default.
std::unique_ptr<AeBackend> make_cpu_backend(const Architecture& arch, const OptimizerConfig& opt, int threads);
// Throws when the build has no CUDA (kernels/ae/gpu_stub.cpp) or the GPU cannot run `arch`.
std::unique_ptr<AeBackend> make_gpu_backend(const Architecture& arch, const OptimizerConfig& opt, Precision precision);

// One rank of a data-parallel group (kernels/ae/data_parallel.h, docs/MULTI_GPU.md): the
// backend trains on GPU `local_rank` (modulo the visible GPUs) and all-reduces its gradient
// with the other ranks through NCCL, which the group's rank 0 sets up through the launch
// folder `rendezvous`. train_epoch() then takes the global epoch order (the same on every rank),
// trains this rank's shards of it and returns the global mean loss; eval_loss() splits its
// images over the ranks. Throws when NCCL cannot be loaded or the group does not form
// within `timeout_seconds`.
struct DataParallelGroup {
  int rank = 0, world = 1, local_rank = 0;
  std::string rendezvous;
  double timeout_seconds = 300;
  std::string agreement{};  // what the ranks of the launch must agree on (cae::launch_agreement)
};
std::unique_ptr<AeBackend> make_gpu_backend(const Architecture& arch, const OptimizerConfig& opt, Precision precision,
                                            const DataParallelGroup& group);

// The backend every tool uses: on the CPU with `threads` (<= 0: OpenMP's default), or on
// the GPU at `precision` — as a rank of `group` when it has more than one rank or a
// rendezvous file (data parallelism is GPU-only).
std::unique_ptr<AeBackend> make_backend(cae::Device device, const Architecture& arch, const OptimizerConfig& opt,
                                        Precision precision, int threads, const DataParallelGroup& group = {});

}  // namespace ae
