#include "kernels/ae/backend.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace ae {

HalfFault AeBackend::encode_halves(const uint8_t* images, int64_t n, int batch, cae::Half* latent) {
  const int64_t dim = architecture().latent_dim(), image_dim = architecture().image_dim();
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, std::max(batch, 1024)));
  // Not zero-filled: encode() writes every code before it is read.
  const std::unique_ptr<float[]> codes(new float[static_cast<size_t>(chunk * dim)]);
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t rows = std::min(chunk, n - first);
    encode(images + first * image_dim, rows, batch, codes.get());
    const size_t count = static_cast<size_t>(rows * dim);
    size_t bad = cae::floats_to_halves(codes.get(), latent + first * dim, count);
    if (bad == count) continue;
    // A code that is not finite lies at `bad` or after it (floats_to_halves stops at either).
    const float* nonfinite = std::find_if(codes.get() + bad, codes.get() + count,
                                          [](float x) { return !std::isfinite(x); });
    if (nonfinite != codes.get() + count) bad = static_cast<size_t>(nonfinite - codes.get());
    return {first * dim + static_cast<int64_t>(bad), codes[bad]};
  }
  return {};
}

std::unique_ptr<AeBackend> make_backend(cae::Device device, const Architecture& arch, const OptimizerConfig& opt,
                                        Precision precision, int threads, const DataParallelGroup& group) {
  if (device != cae::Device::gpu) return make_cpu_backend(arch, opt, threads);
  if (group.world > 1 || !group.rendezvous.empty()) return make_gpu_backend(arch, opt, precision, group);
  return make_gpu_backend(arch, opt, precision);
}

}  // namespace ae
