// libFuzzer target: the IDX reader (MNIST-style files) on arbitrary bytes, both as a file
// (gzip-compressed when the bytes start with gzip's magic: the libarchive path, where a
// header or trailer may lie about the size) and parsed in memory. Seeds: tests/fuzz/run.sh.
#include "common/idx.h"
#include "tests/fuzz/fuzz_file_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (int ndim : {1, 3}) {
    try {
      cae::parse_idx("fuzz", data, size, ndim, 4);
    } catch (const std::runtime_error&) {
    }
  }
  return fuzz::run_file_target(data, size, ".idx.gz", [](const std::string& p) {
    try {
      cae::read_idx_file(p, 3, 2);
    } catch (const std::runtime_error&) {
    }
    cae::read_idx_file(p, 1, 0);
  });
}
