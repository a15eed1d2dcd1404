// Drives every reader entry point of the toolkit over one file, the way the tools use them
// (open, validate, then read a few rows of everything). Shared by the libFuzzer targets
// (tests/fuzz/fuzz_*.cpp) and the unit test that replays tests/fuzz/regressions/: a reader
// may throw std::runtime_error (the tools turn that into one line and exit 1), never crash.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cifar_binary.h"
#include "common/dataset.h"
#include "kernels/ae/checkpoint.h"
#include "kernels/ae/features_reader.h"
#include "kernels/svm/model_file.h"

namespace fuzz {

inline void read_dataset(const std::string& path) {
  cae::DatasetReader r(path);
  r.class_names();
  for (const char* split : {"train", "test"}) {
    const int64_t n = r.count(split);
    cae::ImageSplit s = r.read(split, std::min<int64_t>(n, 8));
    if (n > 0) {
      std::vector<uint8_t> last(static_cast<size_t>(r.image_bytes()));
      r.read_images(split, n - 1, 1, last.data());
    }
  }
}

inline void read_features(const std::string& path) {
  ae::FeaturesReader r(path);
  r.class_names();
  for (const char* split : {"train", "test"}) {
    if (!r.has_split(split)) continue;
    const int64_t n = r.count(split);
    r.dim(split);
    r.read(split, std::min<int64_t>(n, 16));
  }
}

inline void read_model(const std::string& path) {
  ae::read_ae_params(path);
  ae::read_checkpoint(path);
}

inline void read_svm(const std::string& path) { svm::read_model_file(path); }

// Every HDF5 reader in turn; each failure is the expected kind (runtime_error) or it escapes.
inline int read_with_every_reader(const std::string& path) {
  int refused = 0;
  for (auto* reader : {read_dataset, read_features, read_model, read_svm}) {
    try {
      reader(path);
    } catch (const std::runtime_error&) {
      ++refused;
    }
  }
  return refused;
}

// The CIFAR batch parser only gets past its size check with exactly one batch, so the
// input is tiled to 30,730,000 bytes; its first bytes choose how many records to keep.
inline void parse_batch_tiled(const uint8_t* data, size_t size) {
  cae::ImageSplit out;
  try {
    cae::parse_cifar_batch("fuzz", data, size, out, 5);  // the size check itself
  } catch (const std::runtime_error&) {
  }
  if (size == 0) return;
  std::vector<uint8_t> batch(static_cast<size_t>(cae::kCifarBatchBytes));
  for (size_t i = 0; i < batch.size(); i += size) memcpy(&batch[i], data, std::min(size, batch.size() - i));
  const int64_t keep = size >= 2 ? (int64_t(data[0]) << 8 | data[1]) % (cae::kCifarBatchRecords + 2) : 1;
  try {
    cae::parse_cifar_batch("fuzz", batch.data(), batch.size(), out, keep);
  } catch (const std::runtime_error&) {
  }
}

}  // namespace fuzz
