// The image dataset file (format "image-dataset", docs/FORMATS.md): /train/images uint8
// [N,C,H,W], /train/labels uint8 [N], the same under /test, root attribute class_names
// (one name per class; every label < the number of names). Both splits share one image
// shape. Files of the older format "cifar10-dataset" (cifar-convert before issue 14) still
// read: they are the same layout fixed to 3×32×32 and CIFAR-10's ten classes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/hdf5_io.h"
#include "common/large_buffer.h"

namespace cae {

// CIFAR-10 as cifar-convert writes it.
constexpr int kCifarChannels = 3, kCifarHeight = 32, kCifarWidth = 32;
constexpr int64_t kCifarImageBytes = int64_t(kCifarChannels) * kCifarHeight * kCifarWidth;  // 3,072
constexpr int kCifar10Classes = 10;
extern const char* const kCifar10ClassNames[kCifar10Classes];
std::vector<std::string> cifar10_class_names();

struct ImageSplit {
  LargeVector<uint8_t> images;  // [n, C, H, W], CHW per image, as CIFAR stores it; resize() leaves it uninitialised
  std::vector<uint8_t> labels;  // [n], each < the dataset's class count
  int C = 0, H = 0, W = 0;      // image shape
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t image_bytes() const { return int64_t(C) * H * W; }
  const uint8_t* image(int64_t i) const { return images.data() + i * image_bytes(); }
};

// Opens a dataset file and validates both splits' shapes and labels up front; nothing of
// size N·C·H·W is allocated before the shapes have been checked.
class DatasetReader {
 public:
  explicit DatasetReader(const std::string& path);
  const std::string& path() const { return h5_.path(); }
  const std::string& format() const { return format_; }  // "image-dataset" or "cifar10-dataset"
  int channels() const { return C_; }
  int height() const { return H_; }
  int width() const { return W_; }
  int64_t image_bytes() const { return int64_t(C_) * H_ * W_; }
  std::string image_shape_str() const;  // "3x32x32"
  int num_classes() const { return int(class_names_.size()); }
  int64_t count(const std::string& split) const;  // "train" or "test"
  const std::vector<std::string>& class_names() const { return class_names_; }
  // Reads the first `limit` images of a split (all when limit <= 0 or > count).
  ImageSplit read(const std::string& split, int64_t limit = 0) const;
  // Streams rows [row0, row0+rows) of images (for encoders that must stay small).
  void read_images(const std::string& split, int64_t row0, int64_t rows, uint8_t* out) const;
  std::vector<uint8_t> read_labels(const std::string& split, int64_t limit = 0) const;
  const Hdf5Reader& h5() const { return h5_; }

 private:
  Hdf5Reader h5_;
  std::string format_;
  int C_ = 0, H_ = 0, W_ = 0;
  std::vector<std::string> class_names_;
};

// Writes one split into an open writer: images chunked along N and deflated where that
// shrinks them by a tenth or more, otherwise contiguous (docs/FORMATS.md).
// Throws std::invalid_argument unless s.images holds s.size() images of s.C×s.H×s.W.
void write_split(Hdf5Writer& w, const std::string& split, const ImageSplit& s);
// The root attributes of a dataset file besides provenance (class_names). The provenance's
// format must be kDatasetFormat.
inline constexpr const char* kDatasetFormat = "image-dataset";
inline constexpr const char* kOldCifar10Format = "cifar10-dataset";
void write_class_names(Hdf5Writer& w, const std::vector<std::string>& names);

}  // namespace cae
