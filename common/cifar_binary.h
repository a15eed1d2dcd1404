// Reader for the official CIFAR-10 binary distribution: the `cifar-10-batches-bin`
// folder or the `cifar-10-binary.tar.gz` archive (read in memory via libarchive, never
// extracted to disk). Each record is 1 label byte + 3,072 pixel bytes (R, G, B planes of
// 32×32); each batch file is exactly 10,000 records.
#pragma once
#include <cstdint>
#include <string>

#include "common/dataset.h"

namespace cae {

constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;       // 3,073
constexpr int64_t kCifarBatchRecords = 10000;
constexpr int64_t kCifarBatchBytes = kCifarRecordBytes * kCifarBatchRecords;  // 30,730,000
constexpr int kCifarTrainBatches = 5;

struct CifarBinary {
  ImageSplit train, test;
};

// Validates presence and size of all six batches and every label. Keeps the first
// `train_limit` / `test_limit` records of each split (0 = all).
CifarBinary read_cifar_binary(const std::string& input, int64_t train_limit = 0, int64_t test_limit = 0);

// Parses one batch held in memory (exposed for the fuzz target). `name` is used in errors.
void parse_cifar_batch(const std::string& name, const uint8_t* data, size_t size, ImageSplit& out, int64_t keep);

}  // namespace cae
