// libFuzzer target: cae::read_cifar_binary on a file (the .tar.gz path of cifar-convert, via libarchive)
// on arbitrary bytes. Seeds: tests/fuzz/run.sh. Findings go to tests/fuzz/regressions/.
#include "tests/fuzz/fuzz_file_target.h"
#include "tests/fuzz/fuzz_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_file_target(data, size, ".tar.gz", [](const std::string& p) { cae::read_cifar_binary(p, 1, 1); });
}
