// libFuzzer target: the CIFAR-10 batch parser (cae::parse_cifar_batch) on arbitrary bytes,
// tiled to one batch so the label checks and record copies run (tests/fuzz/fuzz_readers.h).
#include "tests/fuzz/fuzz_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::parse_batch_tiled(data, size);
  return 0;
}
