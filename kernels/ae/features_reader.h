// Reading a features file: what svm-fit, svm-eval and classify --features consume
// (docs/FORMATS.md). read_features (at the end) is the one entry point the tools call: it
// opens any of the three formats — the two HDF5 kinds below, and libsvm text
// (common/libsvm_data.h) — and gives the rows a tool asks for. The two HDF5 kinds:
//  * "ae-features" (root attribute format), ae-encode's: /<split>/features [N, D] float16
//    (or float32) with any D ≥ 1, /<split>/labels [N], root class_names, and optionally the root
//    attribute latent_shape [c, h, w] of the encoder that wrote them (c·h·w = D) and the
//    features [N, D] of other views of the images (cae::ViewSet; ae-encode --flip, --shifts):
//    /<split>/features_flip, /<split>/features_shift1, /<split>/features_shift1_flip, ...
//    The writer is kernels/ae/features_file.h.
//  * plain (no format attribute): what a user writes with h5py — /<split>/features [N, D]
//    float16, float32 or float64 (read as float32), /<split>/labels [N] of any integer type, and
//    optionally class_names; without it the classes are 0..max label over every split.
//    No provenance, so no encoder hash: checks that need one do not apply.
// Labels of either kind are class indices 0..K-1 of class_names.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/half.h"
#include "common/hdf5_io.h"
#include "common/large_buffer.h"
#include "common/libsvm_data.h"
#include "common/view_set.h"

namespace ae {

struct FeatureSplit {
  cae::LargeVector<float> X;  // [n, dim] row-major (use X.data()); resize() leaves it uninitialised
  // The rows as a float16 file stores them, [n, dim], when the reader was asked to keep them
  // (FeatureRequest::keep_float16); X is empty then. Half the bytes of X: a GPU fit uploads
  // them and widens them there (svm-fit), or widen() makes X of them.
  cae::LargeVector<cae::Half> X16;
  std::vector<int32_t> labels;  // [n]
  int64_t n = 0;
  int dim = 0;
  // Every row came from a float16 dataset (ae-encode's default): X holds float16 values exactly.
  bool float16 = false;
  // X from X16 (exact), on every core; X16 is freed. Does nothing when X16 is empty.
  void widen();
};

class FeaturesReader {
 public:
  // A file with a format attribute must be "ae-features"; one without is plain. Checks,
  // when present, that latent_shape is three positive extents (their product is checked
  // against each split's row width by dim()).
  explicit FeaturesReader(const std::string& path);
  // True for a plain features file (no format attribute, no provenance).
  bool plain() const { return plain_; }
  const std::string& path() const { return h5_.path(); }
  bool has_split(const std::string& split) const;
  int64_t count(const std::string& split) const;  // rows of /<split>/features
  int dim(const std::string& split) const;        // features per row
  // Root class_names, or "0", "1", ...: ten for ae-features, 1 + the largest label of any
  // split for a plain file.
  std::vector<std::string> class_names() const;
  // [c, h, w] of the encoder's latent, or empty when the file does not record it (files
  // written before the architecture was data).
  const std::vector<int64_t>& latent_shape() const { return latent_shape_; }
  // The sha256 of the model that encoded these features (ae-encode records it as its first
  // input), or "" for files that do not say.
  std::string encoder_sha256() const;
  // The first `rows` rows; requires /<split>/labels (integers, same length, each in
  // 0..class count-1) and that every feature is finite, else throws "<file>: <problem>".
  FeatureSplit read(const std::string& split, int64_t rows) const;

  // The features of every view of `views` (ae-encode --flip / --shifts) in one buffer:
  // [views.count()·rows, D], the `rows` images' view j at rows j·rows.. (views.views() order:
  // with "flip", row i + rows is the mirror of row i), labels repeated — the training set of
  // svm-fit --augment, with no copy of the views' blocks. Checks as read(), for every view.
  // keep_float16: when every view's dataset is float16, the rows stay halves (FeatureSplit::X16).
  FeatureSplit read_views(const std::string& split, int64_t rows, const cae::ViewSet& views,
                          bool keep_float16 = false) const;
  // The first view of `views` whose dataset the split lacks; nullopt when it has them all.
  std::optional<cae::ImageView> missing_view(const std::string& split, const cae::ViewSet& views) const;
  // Fails "<file>: /<split>/features_shift2 is missing: <option> needs the features of the
  // shifted images (run ae-encode --shifts 2)" unless the split has every view.
  void require_views(const std::string& split, const cae::ViewSet& views, const std::string& option) const;

 private:
  void read_checked(const std::string& dataset, int64_t rows, int dim, float* out) const;
  void read_checked(const std::string& dataset, int64_t rows, int dim, cae::Half* out) const;
  // /<split>/labels present, as long as /<split>/features.
  void require_labels(const std::string& split) const;
  // Labels [row0, row0+rows) into `out`, each checked >= 0.
  void read_label_rows(const std::string& split, int64_t row0, int64_t rows, int64_t* out) const;
  // The first `rows` labels (require_labels), refused by cae::require_memory before allocating.
  std::vector<int64_t> read_labels(const std::string& split, int64_t rows) const;

  cae::Hdf5Reader h5_;
  bool plain_ = false;
  std::vector<int64_t> latent_shape_;
};

// What a tool asks of a features file of any format.
struct FeatureRequest {
  std::string split = "train";  // the HDF5 split; libsvm text is one split, the whole file
  int64_t limit = 0;            // the first `limit` rows; 0 (or more than there are): all
  // The option that set `limit`, for a warning when it asks for more rows than there are
  // ("--train-limit"); "": no warning.
  std::string limit_option;
  // Also other views' features (the mirrored images' /<split>/features_flip, the shifted
  // ones' /<split>/features_shift1.., ae-encode --flip / --shifts), after the originals in
  // the same buffer (FeaturesReader::read_views). `views_option` names the option that asks
  // for them in the messages ("--augment flip,shift:2"); libsvm text has none (cae::UsageError).
  cae::ViewSet views;
  std::string views_option = "--tta";
  // Asks for the views of `views`, named "<option> <spec>" in the messages.
  void ask_views(const cae::ViewSet& asked, const std::string& option) {
    views = asked;
    views_option = option + " " + asked.spec();
  }
  // libsvm text: the class names and feature count of the model the rows are for, so that
  // class c and feature f mean there what they mean here (cae::read_libsvm_data); empty / 0
  // for training rows (the file's own labels, ascending).
  std::vector<std::string> model_classes;
  int model_dim = 0;
  // float16 rows of an HDF5 file stay halves (FeatureSplit::X16) instead of being widened to X.
  bool keep_float16 = false;
};

enum class FeaturesFormat { ae_features, plain, libsvm_text };

struct FeatureRows {
  // [views·n, dim] (request.views blocks of n rows: the n originals, then with mirrors
  // their n mirrors, ...), labels repeated per view. With n = 0 no row is read: only split.dim is set.
  FeatureSplit split;
  int64_t n = 0;          // rows per view, after the limit
  int64_t available = 0;  // rows the split holds
  std::vector<std::string> class_names;
  std::string encoder_sha256;     // "" when the file names no encoder (plain HDF5, libsvm text)
  std::string what = "its rows";  // the rows in messages: "/test/features" of an HDF5 file
  FeaturesFormat format = FeaturesFormat::ae_features;
};

// Opens `path` in whichever format it is (HDF5 by its signature, else libsvm text) and reads
// the rows `request` asks for, with every check of FeaturesReader / cae::read_libsvm_data;
// throws "<path>: <problem>" (cae::UsageError for mirrors of libsvm text).
FeatureRows read_features(const std::string& path, const FeatureRequest& request);

// svm-fit's training rows: every row of libsvm text or the first `limit` of /train (0: all;
// more than there are: all, with a warning naming --train-limit), with the images' `views`
// (--augment, named so in the messages) in one [views.count()·n, D] buffer; float16 rows kept
// as halves with keep_float16.
FeatureRows read_training_rows(const std::string& path, int64_t limit, const cae::ViewSet& views,
                               bool keep_float16 = false);

}  // namespace ae
