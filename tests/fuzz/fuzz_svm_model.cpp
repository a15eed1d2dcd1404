// libFuzzer target: svm::read_model_file (svm-model files: svm-eval)
// on arbitrary bytes. Seeds: tests/fuzz/run.sh. Findings go to tests/fuzz/regressions/.
#include "tests/fuzz/fuzz_file_target.h"
#include "tests/fuzz/fuzz_readers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_file_target(data, size, ".h5", fuzz::read_svm);
}
