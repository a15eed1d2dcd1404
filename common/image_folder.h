// Reader for an image folder in torchvision's ImageFolder convention:
//   DIR/train/CLASS/*.png|*.jpg|*.jpeg    DIR/test/CLASS/*
// Class names are train's sub-folder names sorted bytewise (labels 0 … k-1); test's classes
// must be among them. Files of other extensions and hidden files are ignored; an image that
// does not decode is an error naming it, or skipped and counted under skip_bad.
//
// Order: the files of a class sorted by name, the classes interleaved round-robin (the
// first image of every class, then the second, …), so that --train-limit keeps every class.
// Every image goes through convert_image (common/image_decode.h) to one C×H×W.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dataset.h"

namespace cae {

struct ImageFolderOptions {
  int channels = 0;         // 1 or 3; 0: 1 when every image is grayscale, else 3
  int height = 0, width = 0;  // 0: the size of the images, which must then all agree
  bool skip_bad = false;
  int64_t train_limit = 0, test_limit = 0;  // 0 = all
};

struct ImageFolder {
  ImageSplit train, test;
  std::vector<std::string> class_names;
  std::vector<std::string> files;  // every image read, in dataset order (train, then test)
  int64_t skipped = 0;             // images that did not decode (skip_bad)
};

ImageFolder read_image_folder(const std::string& dir, const ImageFolderOptions& opt);

// True when `dir` has a train/ sub-folder.
bool is_image_folder(const std::string& dir);

}  // namespace cae
