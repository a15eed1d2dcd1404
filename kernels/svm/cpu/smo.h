// The binary C-SVC and one-class dual solvers (SMO with second-order working-set selection, Fan, Chen
// and Lin 2005 — the formulation libsvm uses), over kernel rows supplied by the caller.
//
//   min_a  ½ aᵀQa − eᵀa   s.t.  0 ≤ a_t ≤ C_t,  yᵀa = 0,   Q_ts = y_t y_s K(x_t, x_s)
//
// with C_t = Cp for y_t = +1 and Cn for y_t = −1 (libsvm's weighted C, -wi).
//
// Stops when m(a) − M(a) < tol (libsvm's -e). Decision value f(x) = Σ y_t a_t K(x_t, x) − rho.
#pragma once
#include <cstdint>
#include <vector>

namespace svm::cpu {

// Kernel rows of one binary problem. row(t) gives K(x_t, x_s) for every s in [0, n); the
// pointer stays valid at least until the second call after it (the solver holds two rows).
class KernelRows {
 public:
  virtual ~KernelRows() = default;
  virtual const float* row(int t) = 0;
  virtual double diag(int t) const = 0;  // K(x_t, x_t)
};

// The rows of a kernel matrix [n, n] held in memory (row-major), not owned.
class MatrixRows : public KernelRows {
 public:
  MatrixRows(const float* m, int n) : m_(m), n_(n) {}
  const float* row(int t) override { return m_ + static_cast<int64_t>(t) * n_; }
  double diag(int t) const override { return m_[static_cast<int64_t>(t) * n_ + t]; }

 private:
  const float* m_;
  int n_;
};

struct BinaryResult {
  std::vector<double> alpha;  // a_t ≥ 0 (libsvm stores y_t a_t; the caller signs them)
  double rho = 0;
  double objective = 0;
  int64_t iterations = 0;
  bool hit_iteration_limit = false;
};

// y: +1 / −1 per sample; Cp, Cn: the bounds of the positive and negative samples.
BinaryResult solve_binary(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, double tol);
inline BinaryResult solve_binary(KernelRows& K, const int8_t* y, int n, double C, double tol) {
  return solve_binary(K, y, n, C, C, tol);
}

// The one-class SVM (Schölkopf et al. 2001; libsvm's -s 2) over n samples:
//
//   min_a  ½ aᵀKa   s.t.  0 ≤ a_t ≤ 1,  eᵀa = ν n
//
// started, as libsvm starts it, from one_class_start(n, ν). Decision value
// f(x) = Σ a_t K(x_t, x) − rho, > 0 inside the estimated support. 0 < ν ≤ 1.
BinaryResult solve_one_class(KernelRows& K, int n, double nu, double tol);
// libsvm's starting point: a_t = 1 for t < ⌊νn⌋, a_⌊νn⌋ = νn − ⌊νn⌋, the rest 0.
std::vector<double> one_class_start(int n, double nu);

// The dual both solvers above are, from any feasible point: min ½ aᵀQa + linear·eᵀa over
// 0 ≤ a_t ≤ C_t with yᵀa fixed at yᵀ·alpha. G_start: the gradient Q·alpha + linear at the
// start (null: computed from K). max_iter ≤ 0: max(10⁷, 100 n). The working-set solver
// (working_set.h) solves its subproblems with it, each from the gradient the whole problem has.
BinaryResult solve_dual(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, double tol, double linear,
                        std::vector<double> alpha, const double* G_start = nullptr, int64_t max_iter = 0);
// rho and the objective of a solution from its gradient G (res.rho, res.objective): rho the
// mean of y_t G_t over the free multipliers, else the midpoint the bounded ones leave.
void finish_dual(const int8_t* y, int n, double Cp, double Cn, double linear, const double* G, const double* alpha,
                 BinaryResult& res);

}  // namespace svm::cpu
