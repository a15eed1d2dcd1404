// libFuzzer target: svm::import_libsvm_model (libsvm text models: svm-eval --model, classify
// --svm) on arbitrary bytes. Seeds: tests/fuzz/run.sh. Findings go to tests/fuzz/regressions/
// (*.model, replayed by tests/unit/test_libsvm_hostile.cpp).
#include "kernels/svm/libsvm_format.h"
#include "tests/fuzz/fuzz_file_target.h"
#include "tests/fuzz/fuzz_memory_limit.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::limit_address_space(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_file_target(data, size, ".model", [](const std::string& path) { svm::import_libsvm_model(path); });
}
