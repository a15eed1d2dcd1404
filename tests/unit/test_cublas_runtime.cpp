// cuBLAS loaded at run time (common/cublas_runtime.h): every entry point binds, on a
// machine with the toolkit and no GPU too (loading needs no device).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/cublas_runtime.h"

#ifdef CIFARAE_WITH_CUDA
TEST(CublasRuntime, BindsEveryEntryPoint) {
  const cae::cublas::Api& a = cae::cublas::api();
  EXPECT_NE(a.create, nullptr);
  EXPECT_NE(a.destroy, nullptr);
  EXPECT_NE(a.set_stream, nullptr);
  EXPECT_NE(a.set_math_mode, nullptr);
  EXPECT_NE(a.sgemm, nullptr);
  EXPECT_NE(a.dgemm, nullptr);
  ASSERT_NE(a.status_string, nullptr);
  // A host-only call through the loaded library: it answers in cuBLAS's own words.
  EXPECT_NE(std::string(a.status_string(CUBLAS_STATUS_INVALID_VALUE)).find("unsupported value"), std::string::npos);
}

TEST(CublasRuntime, PreloadAndConcurrentCallersShareOneLoad) {
  cae::cublas::preload(cae::DeviceChoice("auto"), 0);  // loads in the background only where there is a GPU
  cae::cublas::settle();
  std::vector<const cae::cublas::Api*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = &cae::cublas::api(); });
  for (std::thread& t : threads) t.join();
  for (const cae::cublas::Api* p : seen) EXPECT_EQ(p, &cae::cublas::api());
}
#endif
