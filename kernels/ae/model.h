// The autoencoder family, as data: an Architecture says which convolutions the model has,
// their shapes and where each one's parameters sit in the flat parameter array.
//
// The family is the seeds' model generalised to k ≥ 1 encoder blocks on a C×H×W input:
//   encoder: for i = 1..k: conv3x3 c(i−1)→c(i) +ReLU, maxpool2          (c(0) = C)
//            latent c(k) × H/2^k × W/2^k (C,H,W flatten order, as PyTorch's flatten)
//   decoder: conv3x3 c(k)→c(k) +ReLU; for i = k..2: upsample×2, conv3x3 c(i)→c(i−1) +ReLU;
//            upsample×2, conv3x3 c(1)→C (no activation)
//   loss:    MSE against the input (pixels/255), mean over every element of the batch
// The seed model is 3×32×32 with channels 256,128: 751,875 parameters, latent 8,192.
//
// Parameters are one flat fp32 array in PyTorch layout, layer by layer in the order of
// convs(), weight [out,in,3,3] then bias [out]. HDF5 groups keep the seeds' names:
// /encoder/conv1..convk, /decoder/conv1..conv(k+1).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ae {

// One 3×3 convolution (stride 1, zero padding 1) of the family and what surrounds it.
struct ConvLayer {
  std::string group;      // HDF5 group in model.h5, e.g. "/encoder/conv1"
  std::string name;       // short name for tables and logs, e.g. "conv1", "dconv2"
  int in = 0, out = 0;    // channels
  int H = 0, W = 0;       // the convolution's spatial size (its input after any upsampling)
  bool upsample = false;  // nearest ×2 upsampling of the input before the convolution
  bool relu = false;      // ReLU after the convolution
  bool pool = false;      // 2×2 max pool after the ReLU (encoder layers)
  int64_t weight_offset = 0, bias_offset = 0;  // into the flat parameters
  int64_t weight_count() const { return int64_t(out) * in * 9; }
  int64_t bias_count() const { return out; }
  double flops(int64_t images) const { return 2.0 * double(images) * H * W * in * out * 9; }  // forward
};

class Architecture {
 public:
  // Throws std::invalid_argument (a message fit for a usage error) unless C, H, W ≥ 1,
  // every channel count ≥ 1, and H and W are divisible by 2^k.
  Architecture(int channels, int height, int width, std::vector<int> encoder_channels);
  static Architecture seed();  // 3×32×32, encoder 256,128

  int input_channels() const { return C_; }
  int height() const { return H_; }
  int width() const { return W_; }
  const std::vector<int>& encoder_channels() const { return enc_; }
  int depth() const { return int(enc_.size()); }  // k

  const std::vector<ConvLayer>& convs() const { return convs_; }  // encoder 1..k, decoder 1..k+1
  int num_convs() const { return int(convs_.size()); }              // 2k + 1
  const ConvLayer& conv(int i) const { return convs_.at(size_t(i)); }
  int64_t param_count() const { return params_; }
  int64_t image_dim() const { return int64_t(C_) * H_ * W_; }     // values per input image
  int latent_channels() const { return enc_.back(); }
  int latent_height() const { return H_ >> depth(); }
  int latent_width() const { return W_ >> depth(); }
  int64_t latent_dim() const { return int64_t(latent_channels()) * latent_height() * latent_width(); }

  // "256,128" ↔ {256, 128}. parse throws std::invalid_argument on anything else.
  std::string channels_string() const;
  static std::vector<int> parse_channels(const std::string& text);
  // One line, e.g. "3x32x32 -> conv 256, 128 -> latent 128x8x8 (8,192)".
  std::string describe() const;

  bool operator==(const Architecture& o) const { return C_ == o.C_ && H_ == o.H_ && W_ == o.W_ && enc_ == o.enc_; }
  bool operator!=(const Architecture& o) const { return !(*this == o); }

 private:
  int C_, H_, W_;
  std::vector<int> enc_;
  std::vector<ConvLayer> convs_;
  int64_t params_ = 0;
};

// He-normal weights (std = sqrt(2 / fan_in), fan_in = in·9) and zero biases, from a seeded
// std::mt19937_64 — the same numbers on every machine.
std::vector<float> init_params(const Architecture& arch, uint64_t seed);

}  // namespace ae
