// Without CUDA the GPU entry points exist but say clearly why they cannot run; the tools
// normally stop earlier, in cae::resolve_device().
#include <stdexcept>

#include "kernels/autoencoder.h"
#include "kernels/svm.h"

#if !defined(CIFARAE_WITH_CUDA) || !defined(CIFARAE_WITH_CUDA_SVM)
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw std::runtime_error(std::string("--device gpu: this build has no CUDA ") + what +
                           " (rebuild on a machine with nvcc)");
}
}  // namespace
#endif

#ifndef CIFARAE_WITH_CUDA
namespace ae {
std::unique_ptr<AeBackend> make_gpu_backend(const OptimizerConfig&, Precision) { no_cuda("support"); }
}  // namespace ae
#endif

#ifndef CIFARAE_WITH_CUDA_SVM
namespace svm {
Model fit_gpu(const float*, const int32_t*, int64_t, int, const FitParams&, const PairCallback&) { no_cuda("SVM"); }
void decision_values_gpu(const Model&, const float*, int64_t, double*) { no_cuda("SVM"); }
}  // namespace svm
#endif
