// Reader for IDX files as MNIST and Fashion-MNIST ship them (http://yann.lecun.com/exdb/mnist/):
// a big-endian header — magic 0x0000 08 D (unsigned bytes, D dimensions), then D uint32
// sizes — followed by the data. `train-images-idx3-ubyte` is [N, H, W] (read as 1×H×W
// images), `train-labels-idx1-ubyte` is [N]. Files may be gzip-compressed (`.gz`, read via
// libarchive in memory); the gzip trailer's size is checked against the header before the
// data buffer is allocated.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/dataset.h"

namespace cae {

struct IdxArray {
  std::vector<uint32_t> dims;  // dims[0]: the rows kept
  uint32_t rows_in_file = 0;   // dims[0] as the header says
  std::vector<uint8_t> data;   // product(dims) bytes
};

// Reads a whole IDX file of unsigned bytes with exactly `ndim` dimensions, keeping the first
// `keep` rows (0 = all) of dimension 0. Throws "<path>: ..." for a wrong magic number, a size
// that does not match the header, a truncated or corrupt gzip stream.
IdxArray read_idx_file(const std::string& path, int ndim, int64_t keep = 0);
// The same on bytes in memory (fuzz targets, tests); `name` is used in errors.
IdxArray parse_idx(const std::string& name, const uint8_t* data, size_t size, int ndim, int64_t keep = 0);

struct IdxDataset {
  ImageSplit train, test;
  std::vector<std::string> class_names;
  std::vector<std::string> files;  // the four files read: train images, labels, test images, labels
  std::string name;                // "fashion-mnist", "mnist" or "idx"
};

// The four files of an MNIST-style folder: {train,t10k}-{images-idx3,labels-idx1}-ubyte,
// each raw or .gz (also the `train-images.idx3-ubyte` spelling). Empty when none is there.
std::vector<std::string> find_idx_files(const std::string& folder);
// Reads the folder. Class names: `names` when given; else Fashion-MNIST's ten names when the
// training labels are Fashion-MNIST's (their sha256) or the folder's name says
// "fashion"; else "0" … "9". Every label must be < the number of names.
IdxDataset read_idx_folder(const std::string& folder, int64_t train_limit, int64_t test_limit,
                           const std::vector<std::string>& names = {});

extern const char* const kFashionMnistClassNames[10];

}  // namespace cae
