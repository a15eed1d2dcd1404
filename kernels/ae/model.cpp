#include "kernels/ae/model.h"

#include <cmath>
#include <random>
#include <stdexcept>

namespace ae {

Architecture::Architecture(int channels, int height, int width, std::vector<int> encoder_channels)
    : C_(channels), H_(height), W_(width), enc_(std::move(encoder_channels)) {
  if (C_ < 1 || H_ < 1 || W_ < 1)
    throw std::invalid_argument("the input shape " + std::to_string(C_) + "x" + std::to_string(H_) + "x" +
                                std::to_string(W_) + " has an empty dimension");
  if (enc_.empty()) throw std::invalid_argument("the encoder needs at least one block (--encoder-channels)");
  for (int c : enc_)
    if (c < 1) throw std::invalid_argument("every encoder channel count must be at least 1");
  const int k = depth();
  if (k > 30 || H_ % (1 << k) != 0 || W_ % (1 << k) != 0)
    throw std::invalid_argument("--encoder-channels " + channels_string() + " pools " + std::to_string(k) +
                                " times, so the image height and width must be divisible by " +
                                (k > 30 ? std::string("2^") + std::to_string(k) : std::to_string(1 << k)) + "; " +
                                std::to_string(H_) + "x" + std::to_string(W_) + " is not");
  auto add = [&](const std::string& part, int index, int in, int out, int h, int w, bool up, bool relu, bool pool) {
    ConvLayer l;
    l.group = "/" + part + "/conv" + std::to_string(index);
    l.name = (part == "encoder" ? "conv" : "dconv") + std::to_string(index);
    l.in = in, l.out = out, l.H = h, l.W = w, l.upsample = up, l.relu = relu, l.pool = pool;
    l.weight_offset = params_;
    l.bias_offset = params_ + l.weight_count();
    params_ = l.bias_offset + l.bias_count();
    convs_.push_back(l);
  };
  for (int i = 1; i <= k; ++i)
    add("encoder", i, i == 1 ? C_ : enc_[size_t(i - 2)], enc_[size_t(i - 1)], H_ >> (i - 1), W_ >> (i - 1), false, true,
        true);
  add("decoder", 1, enc_.back(), enc_.back(), H_ >> k, W_ >> k, false, true, false);
  for (int i = k; i >= 2; --i)  // decoder conv (k − i + 2): up to the size of encoder block i
    add("decoder", k - i + 2, enc_[size_t(i - 1)], enc_[size_t(i - 2)], H_ >> (i - 1), W_ >> (i - 1), true, true, false);
  add("decoder", k + 1, enc_.front(), C_, H_, W_, true, false, false);
}

Architecture Architecture::seed() { return Architecture(3, 32, 32, {256, 128}); }

std::string Architecture::channels_string() const {
  std::string s;
  for (size_t i = 0; i < enc_.size(); ++i) s += (i ? "," : "") + std::to_string(enc_[i]);
  return s;
}

std::vector<int> Architecture::parse_channels(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1 || v > 65536)
      throw std::invalid_argument("'" + text + "' is not a comma-separated list of channel counts from 1 to 65536");
    out.push_back(int(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::string Architecture::describe() const {
  std::string s = std::to_string(C_) + "x" + std::to_string(H_) + "x" + std::to_string(W_) + " -> conv ";
  for (size_t i = 0; i < enc_.size(); ++i) s += (i ? ", " : "") + std::to_string(enc_[i]);
  s += " -> latent " + std::to_string(latent_channels()) + "x" + std::to_string(latent_height()) + "x" +
       std::to_string(latent_width()) + " (" + std::to_string(latent_dim()) + ")";
  return s;
}

std::vector<float> init_params(const Architecture& arch, uint64_t seed) {
  // Box–Muller on std::mt19937_64's raw output (fully specified by the standard), rather
  // than std::normal_distribution, whose algorithm differs between standard libraries.
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] { return (double(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0); };  // (0,1)
  std::vector<float> params(size_t(arch.param_count()), 0.0f);
  for (const ConvLayer& l : arch.convs()) {
    const double std_dev = std::sqrt(2.0 / (l.in * 9.0));
    float* w = params.data() + l.weight_offset;
    for (int64_t i = 0; i < l.weight_count(); i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform())), theta = 2.0 * M_PI * uniform();
      w[i] = static_cast<float>(std_dev * r * std::cos(theta));
      if (i + 1 < l.weight_count()) w[i + 1] = static_cast<float>(std_dev * r * std::sin(theta));
    }
    // biases stay zero
  }
  return params;
}

}  // namespace ae
