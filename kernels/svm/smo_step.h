// The two-variable step of SMO, shared by the CPU solver (kernels/svm/cpu/smo.cpp) and the
// GPU solver (kernels/svm/cuda/svm_gpu_kernels.cu), so that both clip exactly alike: the two
// paths are checked against each other in make test-gpu, and libsvm's path is followed only
// if this one function does what libsvm's Solver::solve does.
#pragma once

#ifdef __CUDACC__
#define SVM_HOST_DEVICE __host__ __device__
#else
#define SVM_HOST_DEVICE
#endif

namespace svm::cpu {

// Curvature floor for non-positive-definite directions (libsvm's TAU).
constexpr double kSmoTau = 1e-12;

struct PairStep {
  double ai, aj;
};

// Moves (a_i, a_j) along the one direction that keeps yᵀa = 0 to the unconstrained
// optimum of the dual, then clips it into the box [0, Ci] x [0, Cj], variable by variable as
// libsvm does (Ci, Cj: each variable's bound, C times its class's weight). Gi, Gj: the
// gradient of the dual; Kii + Kjj − 2 Kij is the curvature.
SVM_HOST_DEVICE inline PairStep smo_pair_step(bool same_label, double Gi, double Gj, double old_ai, double old_aj,
                                              double Kii, double Kjj, double Kij, double Ci, double Cj) {
  double curvature = Kii + Kjj - 2.0 * Kij;
  if (curvature <= 0) curvature = kSmoTau;
  double ai, aj;
  if (!same_label) {
    // a_i − a_j is conserved; both move by the same delta.
    const double delta = (-Gi - Gj) / curvature;
    const double diff = old_ai - old_aj;
    ai = old_ai + delta;
    aj = old_aj + delta;
    if (diff > 0) {
      if (aj < 0) { aj = 0; ai = diff; }
    } else {
      if (ai < 0) { ai = 0; aj = -diff; }
    }
    if (diff > Ci - Cj) {
      if (ai > Ci) { ai = Ci; aj = Ci - diff; }
    } else {
      if (aj > Cj) { aj = Cj; ai = Cj + diff; }
    }
  } else {
    // a_i + a_j is conserved; they move by opposite deltas.
    const double delta = (Gi - Gj) / curvature;
    const double sum = old_ai + old_aj;
    ai = old_ai - delta;
    aj = old_aj + delta;
    if (sum > Ci) {
      if (ai > Ci) { ai = Ci; aj = sum - Ci; }
    } else {
      if (aj < 0) { aj = 0; ai = sum; }
    }
    if (sum > Cj) {
      if (aj > Cj) { aj = Cj; ai = sum - Cj; }
    } else {
      if (ai < 0) { ai = 0; aj = sum; }
    }
  }
  return {ai, aj};
}

}  // namespace svm::cpu
