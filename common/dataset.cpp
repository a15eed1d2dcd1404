#include "common/dataset.h"

#include <algorithm>

#include "common/error.h"

namespace cae {

const char* const kCifar10ClassNames[kNumClasses] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                     "dog",      "frog",       "horse", "ship", "truck"};

DatasetReader::DatasetReader(const std::string& path) : h5_(path) {
  h5_.require_format("cifar10-dataset");
  for (const char* split : {"train", "test"}) {
    std::string s = split;
    Shape img = h5_.require("/" + s + "/images", {0, kImageChannels, kImageSize, kImageSize});
    Shape lab = h5_.require("/" + s + "/labels", {0});
    if (img[0] != lab[0])
      fail_file(path, "/" + s + "/images has " + std::to_string(img[0]) + " rows but /" + s + "/labels has " + std::to_string(lab[0]));
    auto labels = h5_.read<uint8_t>("/" + s + "/labels");
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= kNumClasses)
        fail_file(path, "/" + s + "/labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) + " is not a class 0..9");
    // Images are uint8 by contract; check the dtype now rather than mid-training.
    if (img[0] > 0) {
      uint8_t probe[kImageBytes];
      h5_.read_rows<uint8_t>("/" + s + "/images", 0, 1, probe);
    }
  }
}

int64_t DatasetReader::count(const std::string& split) const {
  return static_cast<int64_t>(h5_.shape("/" + split + "/labels")[0]);
}

std::vector<std::string> DatasetReader::class_names() const {
  if (!h5_.has_attr("/", "class_names")) return {kCifar10ClassNames, kCifar10ClassNames + kNumClasses};
  auto names = h5_.attr_strings("/", "class_names");
  if (names.size() != kNumClasses) fail_file(path(), "class_names has " + std::to_string(names.size()) + " entries, expected 10");
  return names;
}

std::vector<uint8_t> DatasetReader::read_labels(const std::string& split, int64_t limit) const {
  int64_t n = count(split);
  if (limit > 0) n = std::min(n, limit);
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  h5_.read_rows<uint8_t>("/" + split + "/labels", 0, static_cast<uint64_t>(n), labels.data());
  return labels;
}

void DatasetReader::read_images(const std::string& split, int64_t row0, int64_t rows, uint8_t* out) const {
  h5_.read_rows<uint8_t>("/" + split + "/images", static_cast<uint64_t>(row0), static_cast<uint64_t>(rows), out);
}

ImageSplit DatasetReader::read(const std::string& split, int64_t limit) const {
  ImageSplit s;
  s.labels = read_labels(split, limit);
  s.images.resize(static_cast<size_t>(s.size() * kImageBytes));
  read_images(split, 0, s.size(), s.images.data());
  return s;
}

void write_split(Hdf5Writer& w, const std::string& split, const ImageSplit& s) {
  uint64_t n = static_cast<uint64_t>(s.size());
  // 256 images a chunk (~768 KB): large enough to compress, small enough to stream.
  // Level 1: photos barely compress (~0.94 at any level) and level 1 is the fastest.
  w.write("/" + split + "/images", s.images.data(), {n, kImageChannels, kImageSize, kImageSize}, {256, 1});
  w.write("/" + split + "/labels", s.labels.data(), {n}, {4096, 1});
}

}  // namespace cae
