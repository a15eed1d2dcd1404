// Writing an encoder features file (format "ae-features", docs/FORMATS.md): what ae-encode
// produces and svm-fit / svm-eval read (kernels/ae/features_reader.h).
//   /<split>/features  float16 [N, latent_dim]   C,H,W flatten order (PyTorch's flatten);
//                      float32 with FeatureDtype::float32
//   /<split>/labels    uint8   [N]
//   /<split>/features_flip, _shift1, _shift1_flip, ... [N, latent_dim], the same type: the other
//                      views of the images (ae-encode --flip / --shifts; cae::features_dataset)
//   root latent_shape  int64   [c, h, w] of the encoder's latent (c·h·w = latent_dim)
//   root views         string  the view set's spec ("none", "flip", "flip,shift:2", ...)
//   root flip          int64   1 when the views include the mirrors
// plus device, seconds, images_per_second and class_names.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/large_buffer.h"
#include "common/provenance.h"
#include "common/view_set.h"
#include "kernels/ae/model.h"

namespace ae {

// How the features are stored: IEEE binary16 by default — half the bytes to write, read and
// hash, and no coarser than the codes a GPU computes (TF32 products; docs/DECISIONS.md,
// "Features stored as float16") — or float32 (ae-encode --feature-dtype float32), for codes
// beyond float16's range (±65504) or a user who wants the codes as computed.
enum class FeatureDtype { float16, float32 };

class FeaturesWriter {
 public:
  // Creates `path` (normally AtomicOutput::temp_path()); messages name `display_name`.
  FeaturesWriter(const std::string& path, const std::string& display_name, const Architecture& arch,
                 FeatureDtype dtype = FeatureDtype::float16);
  int64_t dim() const { return dim_; }
  // Creates a dataset [n, dim] per view of `views` (the same for every split):
  // /<split>/features, and with flip /<split>/features_flip, ... (cae::features_dataset), to
  // be filled by write_rows in any order.
  void begin_split(const std::string& split, int64_t n, const cae::ViewSet& views = {});
  // Rows [row0, row0 + rows) of view `view` (an index into views.views(): 0 the images, 1
  // their mirrors with flip). For float16, rounded to nearest; a code beyond float16's range
  // fails naming the row, the feature and --feature-dtype float32.
  void write_rows(const std::string& split, int64_t row0, int64_t rows, const float* features, int view = 0);
  // Rows already rounded to float16 (EncodePipeline's HalfSink), for a float16 file.
  void write_rows(const std::string& split, int64_t row0, int64_t rows, const cae::Half* features, int view = 0);
  // Fails naming the file, view `view`'s dataset of `split`, the row and the feature of a code
  // float16 cannot hold (beyond its range: --feature-dtype float32; or not finite).
  [[noreturn]] void fail_not_half(const std::string& split, int view, int64_t row, int64_t feature,
                                  float value) const;
  FeatureDtype dtype() const { return dtype_; }
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
  FeatureDtype dtype_;
  cae::LargeVector<cae::Half> halves_;  // write_rows' float16 rows
  cae::ViewSet views_;
  std::map<std::string, std::vector<std::string>> split_views_;  // each split's datasets, in view order
};

// ae-encode on a group: every rank but 0 sends the features of its share of `split`
// (encode_share of n images in batches of `batch`), kept[v] those of view v (the order of
// begin_split's views), and rank 0 writes them with `w` (null on the other ranks). A
// collective: every rank calls it once per split. The vectors are emptied.
void gather_rank_features(cae::GroupExchange& group, FeaturesWriter* w, const std::string& split, int64_t n, int batch,
                          std::vector<std::vector<float>>& kept);

}  // namespace ae
