// Every source format cifar-convert reads, behind one call: CIFAR-10 binary (folder or
// .tar.gz), IDX (MNIST, Fashion-MNIST), CIFAR-100 binary (folder or .tar.gz), and image
// folders (ImageFolder convention). The format is detected from the input when not given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dataset.h"
#include "common/provenance.h"

namespace cae {

struct SourceOptions {
  std::string format;            // "cifar10" | "idx" | "cifar100" | "folder"; empty: detect
  std::string labels = "fine";   // CIFAR-100: "fine" (100 classes) | "coarse" (20)
  int channels = 0;              // image folders: 1 | 3 | 0 (gray when every image is)
  int height = 0, width = 0;     // image folders: resize to H×W; 0: the images' own size
  bool skip_bad = false;         // image folders: skip undecodable images (counted)
  int64_t train_limit = 0, test_limit = 0;
};

struct SourceDataset {
  ImageSplit train, test;
  std::vector<std::string> class_names;
  std::string format;        // the source format read (the dataset's source_format attribute)
  std::string name;          // "cifar-10", "fashion-mnist", "mnist", "idx", "cifar-100", "image-folder"
  InputFile input;           // name + sha256 (a folder: its files' hashes, in reading order)
  int64_t skipped = 0;       // image folders under skip_bad
};

// Which format `input` is: a folder with data_batch_1.bin/test_batch.bin → cifar10, with
// train.bin/test.bin → cifar100, with IDX files → idx, with train/ → folder; a file whose
// name says cifar-100 → cifar100, any other file → cifar10 (the .tar.gz). Throws
// "<input>: ..." naming what was looked for when nothing matches.
std::string detect_source_format(const std::string& input);

// Reads and validates the whole source (throws UsageError for bad option values).
SourceDataset read_source(const std::string& input, const SourceOptions& opt);

}  // namespace cae
