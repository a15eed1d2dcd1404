// libFuzzer target: the CIFAR-100 reader on arbitrary bytes, as a .tar.gz (libarchive, member
// sizes that may lie) and as one train.bin parsed in memory (record sizes, label ranges).
// Seeds: tests/fuzz/run.sh.
#include "common/cifar100.h"
#include "tests/fuzz/fuzz_file_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cae::ImageSplit split;
  try {
    cae::parse_cifar100("fuzz", data, size, size % 2 == 0, split, 3);
  } catch (const std::runtime_error&) {
  }
  return fuzz::run_file_target(data, size, ".c100.tar.gz",
                               [](const std::string& p) { cae::read_cifar100(p, false, 2, 2); });
}
