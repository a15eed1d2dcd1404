// Reference values the SVM tests check the CPU and GPU solvers against: one kernel value
// from its definition (the block code of kernels/svm/cpu/kernel.h is compared with it) and
// the optimality gap of a dual solution, with the gradient recomputed from scratch rather
// than taken from the solver's own running gradient. No tool calls them; they stay in
// namespace svm::cpu beside the solvers they check.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"

namespace svm::cpu {

// One kernel value in double, straight from the definition.
double kernel_reference(const KernelSpec& k, const float* a, const float* b, int dim);

// The largest KKT violation m(a) − M(a) of a C-SVC solution (≤ tol when converged); the
// notation of kernels/svm/cpu/smo.cpp.
double kkt_gap(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, const std::vector<double>& alpha);
inline double kkt_gap(KernelRows& K, const int8_t* y, int n, double C, const std::vector<double>& alpha) {
  return kkt_gap(K, y, n, C, C, alpha);
}
// The same for a one-class solution (y = e, no linear term).
double kkt_gap_one_class(KernelRows& K, int n, const std::vector<double>& alpha);

}  // namespace svm::cpu
