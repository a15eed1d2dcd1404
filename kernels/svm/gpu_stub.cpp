// Without CUDA the GPU entry points exist but say clearly why they cannot run; the tools
// normally stop earlier, in cae::DeviceChoice::get().
#ifndef CIFARAE_WITH_CUDA
#include <stdexcept>

#include "kernels/svm/approx/nystroem.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/svm.h"

namespace svm {
namespace {
[[noreturn]] void no_cuda() {
  throw std::runtime_error("--device gpu: this build has no CUDA SVM (rebuild on a machine with nvcc)");
}
}  // namespace
Model fit_gpu(const float*, const int32_t*, int64_t, int, const FitParams&, const PairCallback&) { no_cuda(); }
std::vector<Model> fit_gpu_each_C(const float*, const int32_t*, int64_t, int, const FitParams&,
                                  const std::vector<double>&) {
  no_cuda();
}
std::vector<std::vector<PairSolution>> solve_pairs_gpu(const float*, const int32_t*, int64_t, int, const FitParams&,
                                                       const std::vector<double>&, const std::vector<int>&,
                                                       const PairCallback&) {
  no_cuda();
}
void decision_values_gpu(const Model&, const float*, int64_t, double*) { no_cuda(); }
Model fit_one_class_gpu(const float*, int64_t, int, const FitParams&) { no_cuda(); }
std::shared_ptr<DeviceRows> prepare_training_rows_gpu(RawRows, const int32_t*, int64_t, int, const Scaler&,
                                                     PreparedRows&) {
  no_cuda();
}
Model fit_gpu_prepared(DeviceRows&, RawRows, const int32_t*, int64_t, int, const PreparedRows&, const FitParams&,
                       const PairCallback&) {
  no_cuda();
}
void nystroem_projection_gpu(NystroemModel&) { no_cuda(); }
std::vector<NystroemWeights> fit_nystroem_classifiers_gpu(const NystroemModel&, const float*, const DeviceRows*,
                                                          const int32_t*, int64_t, const std::vector<int>&,
                                                          const ClassWeights&, const std::vector<double>&,
                                                          const std::string&) {
  no_cuda();
}
void nystroem_decision_values_gpu(const NystroemModel&, const float*, int64_t, const double*, double*) { no_cuda(); }
}  // namespace svm
#endif
