// libFuzzer target: ae::read_ae_params / ae::read_checkpoint (ae-model files: ae-encode, ae-train --resume)
// on arbitrary bytes. Seeds: tests/fuzz/run.sh. Findings go to tests/fuzz/regressions/.
#include "tests/fuzz/fuzz_file_target.h"
#include "tests/fuzz/fuzz_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_file_target(data, size, ".h5", fuzz::read_model);
}
