// The working-set decomposition of the dual smo.h solves, for binary problems whose kernel
// matrix is not held (Osuna, Freund & Girosi 1997; Joachims 1999; the design of ThunderSVM's
// and cuML's GPU solvers). The problem is the same:
//
//   min_a  ½ aᵀQa + linear·eᵀa   s.t.  0 ≤ a_t ≤ C_t,  yᵀa = const,   Q_ts = y_t y_s K(x_t, x_s)
//
// with G = Qa + linear·e its gradient, and I_up, I_low, m(a), M(a) as in smo.cpp. A round:
//
//   1. stop when m(a) − M(a) < tol — SMO's own test, over all n variables, so the optimum is
//      SMO's to within tol (the iterates take another path);
//   2. the working set B, |B| = q (working_set_size): the variables the last round chose
//      fresh stay (at most q/2 and q − 2: ThunderSVM's rule, without which rounds undo each
//      other),
//      and the rest come fresh — half of them from I_up with the largest −y_t G_t, then
//      those of I_low with the largest y_t G_t not already taken, until q (either side fills
//      what the other lacks). Each violation is rounded to float and ties go to the smaller
//      index: the GPU's sort orders exactly so (cuda/working_set_gpu.cu);
//   3. the kernel rows K(B, ·): from an LRU cache of rows, the missing ones computed
//      together (one GEMM);
//   4. the subproblem over a_B with the other multipliers fixed — the same dual over B with
//      Q_BB and the gradient G_B the whole problem has — solved by SMO (solve_dual) to a gap
//      of max(tol, share · gap), at most a number of steps per variable (WorkingSetOptions);
//   5. G_t += y_t Σ_{s ∈ B} y_s Δa_s K(x_s, x_t) for every t, in the order of B (the same
//      sums whatever the cache held).
//
// Shrinking (WorkingSetOptions::shrinking; Joachims 1999, libsvm's rule): a variable at a
// bound whose gradient keeps it out of every violating pair leaves the active set A —
//
//   t ∈ I_low only (y_t = +1 at C_t, or −1 at 0):  shrunk when −y_t G_t > m(a);
//   t ∈ I_up only  (y_t = +1 at 0, or −1 at C_t):  shrunk when −y_t G_t < M(a),
//
// with m(a), M(a) over A, checked every round from the second. Steps 1–5 then run over A
// alone: the selection (the kept variables still in A), the kernel rows K(B, A) (not K(B, ·)),
// the gradient update of G_A. The gradient of the others goes stale; it is rebuilt from the
// multipliers,
//
//   G_t = linear + y_t Σ_{s: a_s ≠ 0} y_s a_s K(x_s, x_t)   for t ∉ A,
//
// and every variable made active again: once when A's gap first falls below 10·tol (libsvm's
// unshrink: an early shrink undone before the end), and whenever A's gap falls below tol,
// after which the gap over all n decides — it stops there, or the rounds go on over all n.
// So the stopping test is always step 1's over all n variables, and the optimum is the same.
//
// Memory: the rows the problem's source reads plus q + cache rows of n floats (shrinking: and
// a chunk of gathered points, PointKernelRows::compute_columns); nothing of size n². A kernel row's last bits can depend on the rows computed beside it (OpenBLAS
// rounds a row by its place in the block), so the cache moves the iterates' path, not the
// optimum: every cache size stops at the same KKT tolerance.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/cpu/smo.h"

namespace svm::cpu {


// The subproblem's stopping rule (WorkingSetOptions), the same on both devices.
constexpr double kInnerGapShare = 0.1;
constexpr int kInnerStepsPerVariable = 8;

// The kernel rows of one binary problem, computed on request.
class KernelRowSource {
 public:
  virtual ~KernelRowSource() = default;
  virtual int size() const = 0;  // n
  // out[r * n + s] = K(x_rows[r], x_s) for r < count, s < n.
  virtual void compute(const int* rows, int count, float* out) = 0;
  // out[r * ncols + j] = K(x_rows[r], x_cols[j]): a shrunk problem's rows over its active
  // variables. This default computes whole rows and keeps the columns asked for.
  virtual void compute_columns(const int* rows, int count, const int* cols, int ncols, float* out);
  virtual double diag(int t) const = 0;  // K(x_t, x_t)
};

// The rows of points X [n, dim] (row-major) under `kernel`, by kernel_block: the requested
// rows gathered, then sgemms against all n.
class PointKernelRows : public KernelRowSource {
 public:
  PointKernelRows(const KernelSpec& kernel, const float* X, const double* norms, int n, int dim)
      : kernel_(kernel), X_(X), norms_(norms), n_(n), dim_(dim) {}
  int size() const override { return n_; }
  void compute(const int* rows, int count, float* out) override;
  void compute_columns(const int* rows, int count, const int* cols, int ncols, float* out) override;
  double diag(int t) const override { return kernel_.type == KernelType::rbf ? 1.0 : norms_[t]; }
  static constexpr int kRowBatch = 32;

 private:
  void gather_batch(const int* rows, int in_batch);  // into gathered_, gathered_norms_ (sized by the caller)

  KernelSpec kernel_;
  const float* X_;
  const double* norms_;
  int n_, dim_;
  std::vector<float> gathered_, padded_, columns_;
  std::vector<double> gathered_norms_, column_norms_;
};

struct WorkingSetOptions {
  int working_set_size = 1024;  // q; a problem of fewer variables takes them all
  int64_t cache_bytes = 0;      // kernel rows kept between rounds, beyond the working set's own q rows
  // A round's subproblem stops at a gap of max(tol, inner_gap_share · the round's gap) or
  // after inner_steps_per_variable · q SMO steps (docs/SVM.md, "Working sets": measured).
  double inner_gap_share = kInnerGapShare;
  int inner_steps_per_variable = kInnerStepsPerVariable;
  // working_set.h's shrinking: the same optimum; it costs CPU time unless the cache holds
  // little beyond the working set, so svm-fit turns it on only then (cpu/fit.cpp,
  // working_set_options; docs/DECISIONS.md, "Working-set shrinking where the cache is small").
  bool shrinking = false;
};

struct WorkingSetStats {
  int64_t rounds = 0;
  int64_t rows_computed = 0;    // the rounds' kernel rows computed (whole or over A), cache misses included
  int64_t kernel_values = 0;    // every kernel value computed, the gradient rebuilds' included
  int64_t shrunk = 0;           // variables taken out of A, summed over the rounds
  int64_t unshrunk = 0;         // variables made active again, summed over the rebuilds
  int64_t reconstructions = 0;  // gradient rebuilds
  int64_t brought_back = 0;     // of those, the ones their rebuilt gradient no longer lets leave: shrunk too early
};

// C-SVC: linear −1 from alpha 0 (solve_binary's problem); one-class: linear 0 from
// one_class_start with y all +1 (solve_one_class's). The start's gradient is computed from
// the rows of its non-zero multipliers.
BinaryResult solve_dual_working_set(KernelRowSource& K, const int8_t* y, double Cp, double Cn, double tol,
                                    double linear, std::vector<double> alpha, const WorkingSetOptions& options,
                                    WorkingSetStats* stats = nullptr);
inline BinaryResult solve_binary_working_set(KernelRowSource& K, const int8_t* y, double Cp, double Cn, double tol,
                                             const WorkingSetOptions& options, WorkingSetStats* stats = nullptr) {
  return solve_dual_working_set(K, y, Cp, Cn, tol, -1.0, std::vector<double>(static_cast<size_t>(K.size()), 0.0),
                                options, stats);
}

// Step 2 of a round (exposed for the tests and the GPU's check): the working set, ascending.
// `kept` (distinct; the first min(q/2, q − 2) of them) come first; the rest are taken fresh — half from
// I_up, then I_low, then I_up again — and listed in `fresh` in the order taken.
// With `active` (ascending), the set is chosen from those variables alone.
std::vector<int> select_working_set(const int8_t* y, const double* G, const double* alpha, const double* Cs, int n,
                                    int q, const std::vector<int>& kept = {}, std::vector<int>* fresh = nullptr,
                                    const std::vector<int>* active = nullptr);

}  // namespace svm::cpu
