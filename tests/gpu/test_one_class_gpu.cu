// The one-class SVM on the GPU (svm::fit_one_class_gpu, decision_values_gpu of a one-class
// model) against its CPU twin (fit_one_class_cpu, libsvm's path): the same start, the same
// steps, so on kernel values that differ only by the BLAS the solutions agree to the
// tolerance; the GPU solution is feasible and optimal under the CPU's kernel values, in both
// of the solver's state paths (shared memory, and global memory for n beyond it). Skipped,
// with a message, where no GPU is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/device.h"
#include "common/half.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"
#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/svm.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/dense_kernel_rows.h"
#include "tests/support/one_class_cloud.h"
#include "tests/support/svm_reference.h"
#include "tests/support/svm_shortcuts.h"

namespace {

svm::FitParams one_class(double nu, double gamma, svm::KernelType kernel, double tol) {
  svm::FitParams p;
  p.kind = svm::SvmKind::one_class;
  p.nu = nu;
  p.gamma = kernel == svm::KernelType::rbf ? gamma : 0.0;
  p.kernel = kernel;
  p.tol = tol;
  p.log_summary = false;
  return p;
}

// Every row's alpha (0 where it is no support vector).
std::vector<double> alphas(const svm::Model& m, int64_t n) {
  std::vector<double> a(static_cast<size_t>(n), 0.0);
  for (int64_t v = 0; v < m.n_sv(); ++v) a[m.support_indices[v]] = m.dual_coef[v];
  return a;
}

void expect_close(const svm::Model& gpu, const svm::Model& cpu, const std::vector<float>& X, int64_t n, int dim,
                  const svm::FitParams& p) {
  ASSERT_EQ(gpu.kind, svm::SvmKind::one_class);
  ASSERT_TRUE(gpu.classes.empty());
  EXPECT_NEAR(static_cast<double>(gpu.n_sv()), static_cast<double>(cpu.n_sv()), std::max(2.0, 0.02 * cpu.n_sv()));
  EXPECT_NEAR(gpu.rho[0], cpu.rho[0], 1e-3 * std::max(1.0, std::fabs(cpu.rho[0])));
  const std::vector<double> a = alphas(gpu, n);
  double sum = 0;
  for (double v : a) {
    ASSERT_GE(v, 0.0);
    ASSERT_LE(v, 1.0);
    sum += v;
  }
  EXPECT_NEAR(sum, p.nu * static_cast<double>(n), 1e-9 * static_cast<double>(n));
  auto K = svm_test::DenseKernelRows::by_cpu_blocks(svm::cpu::KernelSpec{p.kernel, p.gamma}, X.data(),
                                                   static_cast<int>(n), dim);
  // Optimal under the CPU's kernel values: the BLAS differ in the last bits, not more.
  EXPECT_LT(svm::cpu::kkt_gap_one_class(K, static_cast<int>(n), a), 3 * p.tol);
}

}  // namespace

TEST(OneClassGpu, MatchesCpu) {
  REQUIRE_GPU();
  const int64_t n = 1500, n_test = 2000;
  const int dim = 24;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 3), T = svm_test::one_class_cloud(n_test, dim, 4);
  for (svm::KernelType kernel : {svm::KernelType::rbf, svm::KernelType::linear})
    for (double nu : {0.03, 0.3, 0.9}) {
      SCOPED_TRACE(std::string(svm::kernel_name(kernel)) + " nu " + std::to_string(nu));
      const svm::FitParams p = one_class(nu, 1.0 / (dim * 1.5), kernel, 1e-3);
      const svm::Model cpu = svm::fit_one_class_cpu(X.data(), n, dim, p);
      const svm::Model gpu = svm::fit_one_class_gpu(X.data(), n, dim, p);
      expect_close(gpu, cpu, X, n, dim, p);
      // Decisions of either model on either device.
      std::vector<double> d_cpu(n_test), d_gpu(n_test), d_gpu_on_cpu(n_test);
      svm::decision_values_cpu(cpu, T.data(), n_test, d_cpu.data());
      svm::decision_values_gpu(cpu, T.data(), n_test, d_gpu.data());
      svm::decision_values_cpu(gpu, T.data(), n_test, d_gpu_on_cpu.data());
      double worst_device = 0, worst_model = 0;
      int agree = 0;
      for (int64_t i = 0; i < n_test; ++i) {
        worst_device = std::max(worst_device, std::fabs(d_gpu[i] - d_cpu[i]) / (1 + std::fabs(d_cpu[i])));
        worst_model = std::max(worst_model, std::fabs(d_gpu_on_cpu[i] - d_cpu[i]) / (1 + std::fabs(d_cpu[i])));
        agree += (d_gpu_on_cpu[i] > 0) == (d_cpu[i] > 0);
      }
      EXPECT_LE(worst_device, 1e-5);
      EXPECT_LE(worst_model, 1e-2);
      EXPECT_GE(agree, 0.99 * n_test);
      const std::vector<int32_t> labels = svm::one_class_labels(d_gpu.data(), n_test);
      EXPECT_GT(std::count(labels.begin(), labels.end(), -1), 0);
      EXPECT_GT(std::count(labels.begin(), labels.end(), 1), 0);
    }
}

// Past the shared memory of one block (about 13,000 rows) the solver keeps its state in
// global memory: the same solution.
TEST(OneClassGpu, StateInGlobalMemoryMatchesCpu) {
  REQUIRE_GPU();
  const int dim = 8;
  const int64_t n = static_cast<int64_t>(svm::cuda::smo_max_shared_bytes() / 17) + 500;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 9);
  const svm::FitParams p = one_class(0.1, 0.2, svm::KernelType::rbf, 1e-3);
  ASSERT_GT(svm::cuda::smo_state_bytes(n), svm::cuda::smo_max_shared_bytes());
  const svm::Model cpu = svm::fit_one_class_cpu(X.data(), n, dim, p);
  const svm::Model gpu = svm::fit_one_class_gpu(X.data(), n, dim, p);
  expect_close(gpu, cpu, X, n, dim, p);
}

// Working sets, the path past the whole matrix's size (no n × n matrix): the CPU's solution of
// the float16 rows they compute from, and optimal under the CPU's kernel values of those rows;
// with q below νn the start's multipliers enter in several batches.
TEST(OneClassGpu, WorkingSetsMatchCpu) {
  REQUIRE_GPU();
  const int64_t n = 3000;
  const int dim = 20;
  std::vector<float> X = svm_test::one_class_cloud(n, dim, 21);
  cae::round_to_half(X.data(), X.size());
  svm::cuda::FitOptions options;
  options.path = svm::cuda::FitOptions::Path::working_set;
  options.working_set_size = 256;
  for (double nu : {0.05, 0.5}) {
    SCOPED_TRACE("nu " + std::to_string(nu));
    const svm::FitParams p = one_class(nu, 1.0 / (dim * 1.5), svm::KernelType::rbf, 1e-3);
    const svm::Model cpu = svm::fit_one_class_cpu(X.data(), n, dim, p);
    const svm::Model gpu = svm::cuda::fit_one_class(X.data(), n, dim, p, options);
    expect_close(gpu, cpu, X, n, dim, p);
  }
}

// The Classifier on either device (what svm-fit --kind one-class --device gpu runs).
TEST(OneClassGpu, ClassifierOnGpuMatchesCpu) {
  REQUIRE_GPU();
  const int64_t n = 900, n_test = 700;
  const int dim = 12;
  const std::vector<float> X = svm_test::one_class_cloud(n, dim, 13), T = svm_test::one_class_cloud(n_test, dim, 14);
  const std::vector<int32_t> y(static_cast<size_t>(n), 0);
  svm::ClassifierParams params;
  params.kind = svm::SvmKind::one_class;
  params.nu = 0.2;
  params.log_summary = false;
  std::vector<float> a = X, b = X;
  svm::Classifier cpu, gpu;
  cpu.fit(a.data(), y.data(), n, dim, params, cae::Device::cpu);
  gpu.fit(b.data(), y.data(), n, dim, params, cae::Device::gpu);
  EXPECT_EQ(gpu.model().kind, svm::SvmKind::one_class);
  std::vector<float> ta = T, tb = T;
  const std::vector<int32_t> pc = svm_test::predict(cpu, ta.data(), n_test, cae::Device::cpu);
  const std::vector<int32_t> pg = svm_test::predict(gpu, tb.data(), n_test, cae::Device::gpu);
  int agree = 0;
  for (int64_t i = 0; i < n_test; ++i) agree += pc[i] == pg[i];
  EXPECT_GE(agree, 0.99 * n_test);
  EXPECT_GT(std::count(pg.begin(), pg.end(), -1), 0);
}
