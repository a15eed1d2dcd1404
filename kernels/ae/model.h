// The seeds' convolutional autoencoder, and the device seam for training and encoding it.
//
//   encoder: conv3x3 3→256 +ReLU, maxpool2 (32→16), conv3x3 256→128 +ReLU, maxpool2 (16→8)
//            latent 128×8×8 = 8,192 (C,H,W flatten order, as PyTorch's flatten)
//   decoder: conv3x3 128→128 +ReLU, upsample×2 (8→16), conv3x3 128→256 +ReLU,
//            upsample×2 (16→32), conv3x3 256→3 (no activation)
//   loss:    MSE against the input (pixels/255), mean over every element of the batch
//
// Parameters are one flat fp32 array in PyTorch layout, layer by layer, weight
// [out,in,3,3] then bias [out]: 751,875 values in all. The CPU backend
// (kernels/ae/cpu/backend_cpu.cpp) is the reference; the CUDA backend
// (kernels/ae/cuda/backend_gpu.cu) is checked against it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ae {

struct ConvSpec {
  const char* group;  // HDF5 group in model.h5
  int in, out;        // channels
  int size;           // input height = width
  bool relu;
};
inline constexpr int kNumConvs = 5;
inline constexpr ConvSpec kConvs[kNumConvs] = {
    {"/encoder/conv1", 3, 256, 32, true},  {"/encoder/conv2", 256, 128, 16, true},
    {"/decoder/conv1", 128, 128, 8, true}, {"/decoder/conv2", 128, 256, 16, true},
    {"/decoder/conv3", 256, 3, 32, false}};
inline constexpr int kLatentDim = 128 * 8 * 8;  // 8,192
inline constexpr int kImageDim = 3 * 32 * 32;   // 3,072

constexpr int64_t weight_count(int layer) { return int64_t(kConvs[layer].out) * kConvs[layer].in * 9; }
constexpr int64_t bias_count(int layer) { return kConvs[layer].out; }
constexpr int64_t weight_offset(int layer) {
  return layer == 0 ? 0 : weight_offset(layer - 1) + weight_count(layer - 1) + bias_count(layer - 1);
}
constexpr int64_t bias_offset(int layer) { return weight_offset(layer) + weight_count(layer); }
inline constexpr int64_t kParamCount = bias_offset(kNumConvs - 1) + bias_count(kNumConvs - 1);
static_assert(kParamCount == 751875, "the seeds' model has 751,875 parameters");

// He-normal weights (std = sqrt(2 / fan_in), fan_in = in*9) and zero biases, from a
// seeded std::mt19937_64 — the same numbers on every machine.
std::vector<float> init_params(uint64_t seed);

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
  std::vector<float> m;  // adam first moment / sgd momentum buffer (kParamCount, or empty)
  std::vector<float> v;  // adam second moment (kParamCount, or empty)
};

enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);

// Called during an epoch so the tool can draw progress. GPU backends call it only every
// few steps: reading the loss back is a host synchronisation.
using StepCallback = std::function<void(int64_t images_done, double running_mean_loss)>;

class AeBackend {
 public:
  virtual ~AeBackend() = default;
  virtual std::string describe() const = 0;  // e.g. "cpu, 2 threads" or "NVIDIA H100, bf16"

  virtual void set_params(const std::vector<float>& params) = 0;  // kParamCount values
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
  // Mean MSE over images (no training), in batches.
  virtual double eval_loss(const uint8_t* images, int64_t n, int batch) = 0;
  // Decoder output (pixels/255 scale) for n images: [n,3,32,32].
  virtual void reconstruct(const uint8_t* images, int64_t n, float* out) = 0;
  // Latent codes [n, 8192], C,H,W order.
  virtual void encode(const uint8_t* images, int64_t n, int batch, float* latent) = 0;
};

// threads <= 0: OpenMP's default.
std::unique_ptr<AeBackend> make_cpu_backend(const OptimizerConfig& opt, int threads);
// Throws when the build has no CUDA. Defined in kernels/cuda/ (or a stub without CUDA).
std::unique_ptr<AeBackend> make_gpu_backend(const OptimizerConfig& opt, Precision precision);

}  // namespace ae
