// Reader for the official CIFAR-100 binary distribution: the `cifar-100-binary` folder
// (train.bin, test.bin, fine_label_names.txt, coarse_label_names.txt) or the
// `cifar-100-binary.tar.gz` archive (read in memory via libarchive). Each record is
// 1 coarse-label byte, 1 fine-label byte, 3,072 pixel bytes (R, G, B planes of 32×32);
// the official files hold 50,000 and 10,000 records, any whole number of records is read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dataset.h"

namespace cae {

constexpr int64_t kCifar100RecordBytes = 2 + kCifarImageBytes;  // 3,074
constexpr int kCifar100Fine = 100, kCifar100Coarse = 20;

struct Cifar100 {
  ImageSplit train, test;
  std::vector<std::string> class_names;  // from the meta file, else "0" … "k-1"
  std::vector<std::string> files;        // what was read (for provenance)
};

// `coarse`: the 20 superclasses instead of the 100 classes.
Cifar100 read_cifar100(const std::string& input, bool coarse, int64_t train_limit = 0, int64_t test_limit = 0);

// Parses one file held in memory; `name` is used in errors. Every label is checked.
void parse_cifar100(const std::string& name, const uint8_t* data, size_t size, bool coarse, ImageSplit& out,
                    int64_t keep);

// True when `folder` holds train.bin and test.bin.
bool is_cifar100_folder(const std::string& folder);

}  // namespace cae
