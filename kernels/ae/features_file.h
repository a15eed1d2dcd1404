// Writing an encoder features file (format "ae-features", docs/FORMATS.md): what ae-encode
// produces and svm-fit / svm-eval read (kernels/ae/features_reader.h).
//   /<split>/features  float32 [N, latent_dim]   C,H,W flatten order (PyTorch's flatten)
//   /<split>/labels    uint8   [N]
//   /<split>/features_flip float32 [N, latent_dim]  of the mirrored images (ae-encode --flip)
//   root latent_shape  int64   [c, h, w] of the encoder's latent (c·h·w = latent_dim)
//   root flip          int64   1 when the file has the mirrored features
// plus device, seconds, images_per_second and class_names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/provenance.h"
#include "kernels/ae/model.h"

namespace ae {

class FeaturesWriter {
 public:
  // Creates `path` (normally AtomicOutput::temp_path()); messages name `display_name`.
  FeaturesWriter(const std::string& path, const std::string& display_name, const Architecture& arch);
  int64_t dim() const { return dim_; }
  // Creates /<split>/features [n, dim] (and, with `flipped`, /<split>/features_flip), to be
  // filled by write_rows in any order.
  void begin_split(const std::string& split, int64_t n, bool flipped = false);
  void write_rows(const std::string& split, int64_t row0, int64_t rows, const float* features, bool flipped = false);
  void write_labels(const std::string& split, const std::vector<uint8_t>& labels);
  struct Summary {
    std::string device;
    double seconds = 0, images_per_second = 0;
    std::vector<std::string> class_names;
  };
  // Writes the root attributes and closes the file.
  void finish(const cae::Provenance& provenance, const Summary& summary);

 private:
  cae::Hdf5Writer w_;
  std::vector<int64_t> latent_shape_;
  int64_t dim_;
  bool flipped_ = false;
};

// ae-encode on a group: every rank but 0 sends the features of its share of `split`
// (encode_share of n images in batches of `batch`) — `kept[0]`, then the mirrors' `kept[1]`
// (empty without `flip`) — and rank 0 writes them with `w` (null on the other ranks). A
// collective: every rank calls it once per split. The vectors are emptied.
void gather_rank_features(cae::GroupExchange& group, FeaturesWriter* w, const std::string& split, int64_t n, int batch,
                          bool flip, std::vector<float> (&kept)[2]);

}  // namespace ae
