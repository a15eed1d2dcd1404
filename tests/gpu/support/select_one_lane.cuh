// The working-set selection of kernels/svm/cuda/working_set_select.cuh for one problem alone,
// with its own scratch: what the GPU tests compare with the CPU's select_working_set.
#pragma once
#include <cuda_runtime.h>

#include <vector>

namespace gpu_test {

// One problem of n variables on the device (d_alpha, d_G): y is +1 for t < na, −1 after;
// `kept` the last round's fresh variables in the order taken. Returns the working set,
// ascending, its fresh part in the order taken, and m(a), −M(a).
struct SelectedWorkingSet {
  std::vector<int> ws, fresh;
  double m_up = 0, m_low = 0;
};
SelectedWorkingSet select_one_lane(const double* d_alpha, const double* d_G, int n, int na, double Cp, double Cn,
                                   int q, const std::vector<int>& kept, cudaStream_t stream);

}  // namespace gpu_test
