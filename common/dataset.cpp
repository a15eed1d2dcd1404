#include "common/dataset.h"

#include <algorithm>
#include <stdexcept>

#include "common/class_names.h"
#include "common/error.h"

namespace cae {

const char* const kCifar10ClassNames[kCifar10Classes] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                         "dog",      "frog",       "horse", "ship", "truck"};

std::vector<std::string> cifar10_class_names() { return {kCifar10ClassNames, kCifar10ClassNames + kCifar10Classes}; }

namespace {

// An image larger than this is a damaged shape, not a photo: refusing it keeps a 2 KB file
// from sizing a multi-gigabyte buffer (256 MB per image is far beyond any model here).
constexpr uint64_t kMaxImageBytes = uint64_t(1) << 28;
// Labels are uint8, so at most 256 classes can be told apart.
constexpr size_t kMaxClasses = 256;

}  // namespace

DatasetReader::DatasetReader(const std::string& path) : h5_(path) {
  // The old CIFAR-10 format keeps its fixed shape and class list; the general format
  // takes both from the file.
  format_ = h5_.has_attr("/", "format") && h5_.attr_string("/", "format") == kOldCifar10Format ? kOldCifar10Format
                                                                                                 : kDatasetFormat;
  h5_.require_format(format_, "cifar-convert");
  const bool old = format_ == kOldCifar10Format;

  Shape shape;  // [C,H,W] of the first split, which the second must share
  for (const char* split : {"train", "test"}) {
    const std::string s = split;
    const Shape img = old ? h5_.require("/" + s + "/images", {0, kCifarChannels, kCifarHeight, kCifarWidth})
                          : h5_.require("/" + s + "/images", {0, 0, 0, 0});
    const Shape lab = h5_.require("/" + s + "/labels", {0});
    if (img[0] != lab[0])
      fail_file(path, "/" + s + "/images has " + std::to_string(img[0]) + " rows but /" + s + "/labels has " +
                          std::to_string(lab[0]));
    const Shape chw{img[1], img[2], img[3]};
    if (shape.empty()) {
      if (chw[0] < 1 || chw[1] < 1 || chw[2] < 1)
        fail_file(path, "/" + s + "/images has shape " + shape_str(img) + ": an image needs C, H, W >= 1");
      if (chw[0] > kMaxImageBytes || chw[1] > kMaxImageBytes || chw[2] > kMaxImageBytes ||
          chw[0] * chw[1] * chw[2] > kMaxImageBytes)
        fail_file(path, "/" + s + "/images has shape " + shape_str(img) + ": images of more than 2^28 bytes are not supported");
      shape = chw;
    } else if (chw != shape) {
      fail_file(path, "/" + s + "/images has images of " + shape_str(chw) + " but /train/images of " + shape_str(shape) +
                          " (both splits must share one image shape)");
    }
  }
  C_ = int(shape[0]), H_ = int(shape[1]), W_ = int(shape[2]);

  if (old) {
    class_names_ = cifar10_class_names();
    if (h5_.has_attr("/", "class_names")) {
      class_names_ = h5_.attr_strings("/", "class_names");
      if (class_names_.size() != kCifar10Classes)
        fail_file(path, "class_names has " + std::to_string(class_names_.size()) + " entries, expected 10");
    }
  } else {
    if (!h5_.has_attr("/", "class_names")) fail_file(path, "has no class_names attribute");
    class_names_ = h5_.attr_strings("/", "class_names");
    if (class_names_.empty() || class_names_.size() > kMaxClasses)
      fail_file(path, "class_names has " + std::to_string(class_names_.size()) + " entries, expected 1 to 256");
  }

  class_names_ = checked_class_names(class_names_, path);
  const size_t k = class_names_.size();
  for (const char* split : {"train", "test"}) {
    const std::string s = split;
    auto labels = h5_.read<uint8_t>("/" + s + "/labels");
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= k)
        fail_file(path, "/" + s + "/labels[" + std::to_string(i) + "] = " + std::to_string(labels[i]) +
                            " is not a class 0.." + std::to_string(k - 1));
    // Images are uint8 by contract; check the dtype now rather than mid-training.
    if (!labels.empty()) {
      std::vector<uint8_t> probe(static_cast<size_t>(image_bytes()));
      h5_.read_rows<uint8_t>("/" + s + "/images", 0, 1, probe.data());
    }
  }
}

std::string DatasetReader::image_shape_str() const {
  return std::to_string(C_) + "x" + std::to_string(H_) + "x" + std::to_string(W_);
}

int64_t DatasetReader::count(const std::string& split) const {
  return static_cast<int64_t>(h5_.shape("/" + split + "/labels")[0]);
}

std::vector<uint8_t> DatasetReader::read_labels(const std::string& split, int64_t limit) const {
  int64_t n = count(split);
  if (limit > 0) n = std::min(n, limit);
  require_memory(path(), "/" + split + "/labels", static_cast<uint64_t>(n));
  std::vector<uint8_t> labels(static_cast<size_t>(n));
  h5_.read_rows<uint8_t>("/" + split + "/labels", 0, static_cast<uint64_t>(n), labels.data());
  return labels;
}

void DatasetReader::read_images(const std::string& split, int64_t row0, int64_t rows, uint8_t* out) const {
  h5_.read_rows<uint8_t>("/" + split + "/images", static_cast<uint64_t>(row0), static_cast<uint64_t>(rows), out);
}

ImageSplit DatasetReader::read(const std::string& split, int64_t limit) const {
  ImageSplit s;
  s.C = C_, s.H = H_, s.W = W_;
  // Deflated zeros declare any size: the images are checked against memory before either buffer.
  const int64_t n = limit > 0 ? std::min(count(split), limit) : count(split);
  require_memory(path(), "/" + split + "/images",
                 saturating_product(static_cast<uint64_t>(n), static_cast<uint64_t>(image_bytes())));
  s.labels = read_labels(split, limit);
  s.images.resize(static_cast<size_t>(s.size() * image_bytes()));
  read_images(split, 0, s.size(), s.images.data());
  return s;
}

void write_split(Hdf5Writer& w, const std::string& split, const ImageSplit& s) {
  if (s.C < 1 || s.H < 1 || s.W < 1 || s.images.size() != static_cast<size_t>(s.size() * s.image_bytes()))
    throw std::invalid_argument("write_split: images do not match the split's size and shape");
  const uint64_t n = static_cast<uint64_t>(s.size());
  // About 768 KB of pixels a chunk (256 CIFAR images): large enough to compress, small
  // enough to stream. Level 1, the fastest: no level shrinks photos much. Deflated only when
  // a sample of chunks loses at least a tenth of its bytes (Fashion-MNIST's dark backgrounds
  // do): CIFAR-10's photos keep 0.94 of theirs, and for 6 % of the disk every reader would
  // inflate every image (docs/DECISIONS.md, "Image datasets deflated only where it pays").
  const uint64_t chunk = std::max<uint64_t>(1, (uint64_t(256) * kCifarImageBytes) / uint64_t(s.image_bytes()));
  const DatasetOptions deflated{chunk, 1};  // the sample is judged at the level the write uses
  const bool deflate_pays =
      deflated_share(s.images.data(), s.images.size(), static_cast<size_t>(chunk * s.image_bytes()), deflated.deflate) <= 0.9;
  w.write("/" + split + "/images", s.images.data(), {n, uint64_t(s.C), uint64_t(s.H), uint64_t(s.W)},
          deflate_pays ? deflated : DatasetOptions{});
  w.write("/" + split + "/labels", s.labels.data(), {n}, {4096, 1});
}

void write_class_names(Hdf5Writer& w, const std::vector<std::string>& names) { w.set_attr("/", "class_names", names); }

}  // namespace cae
