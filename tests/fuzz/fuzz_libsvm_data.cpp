// libFuzzer target: cae::read_libsvm_data (libsvm text features: svm-eval/svm-fit --features,
// ae::read_features) on arbitrary bytes. Seeds: tests/fuzz/run.sh. Findings go to
// tests/fuzz/regressions/ (*.libsvm, replayed by tests/unit/test_libsvm_hostile.cpp).
#include "common/libsvm_data.h"
#include "tests/fuzz/fuzz_file_target.h"
#include "tests/fuzz/fuzz_memory_limit.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return fuzz::limit_address_space(); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return fuzz::run_file_target(data, size, ".libsvm", [](const std::string& path) { cae::read_libsvm_data(path); });
}
