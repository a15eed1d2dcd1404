// The converted CIFAR-10 dataset file (format "cifar10-dataset", docs/FORMATS.md):
// /train/images uint8 [N,3,32,32], /train/labels uint8 [N], same under /test,
// root attribute class_names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/hdf5_io.h"

namespace cae {

constexpr int kImageChannels = 3, kImageSize = 32;
constexpr int64_t kImageBytes = kImageChannels * kImageSize * kImageSize;  // 3,072
constexpr int kNumClasses = 10;
extern const char* const kCifar10ClassNames[kNumClasses];

struct ImageSplit {
  std::vector<uint8_t> images;  // [n, 3, 32, 32], CHW per image, as CIFAR stores it
  std::vector<uint8_t> labels;  // [n], 0..9
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Opens a dataset file and validates both splits' shapes and labels up front.
class DatasetReader {
 public:
  explicit DatasetReader(const std::string& path);
  const std::string& path() const { return h5_.path(); }
  int64_t count(const std::string& split) const;  // "train" or "test"
  std::vector<std::string> class_names() const;
  // Reads the first `limit` images of a split (all when limit <= 0 or > count).
  ImageSplit read(const std::string& split, int64_t limit = 0) const;
  // Streams rows [row0, row0+rows) of images (for encoders that must stay small).
  void read_images(const std::string& split, int64_t row0, int64_t rows, uint8_t* out) const;
  std::vector<uint8_t> read_labels(const std::string& split, int64_t limit = 0) const;
  const Hdf5Reader& h5() const { return h5_; }

 private:
  Hdf5Reader h5_;
};

// Writes one split (images chunked along N, deflate-compressed) into an open writer.
void write_split(Hdf5Writer& w, const std::string& split, const ImageSplit& s);

}  // namespace cae
