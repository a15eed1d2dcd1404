// The working-set solver on the GPU (kernels/svm/cpu/working_set.h states the rounds; this
// is the same algorithm): for class pairs whose matrix is not held. Design in
// docs/SVM_GPU.md, "Working sets".
//
// Several pairs run side by side, one *lane* each: a round is a handful of launches for all
// the lanes at once — the violations of every lane's variables as sort keys, one radix sort,
// a block per lane that takes its working set — then, per lane, the rows the cache lacks
// (one gather and two tensor-core GEMMs against the pair's rows), and for all lanes together
// the subproblems (the SMO kernel of svm_gpu_kernels.cu, one block each, every subproblem on
// chip) and the gradient update. The host keeps each lane's row cache (svm::RowSlots) between
// the working set it reads back and the rows it asks for.
#pragma once
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/svm/cpu/working_set.h"
#include "kernels/svm/cuda/svm_gpu.cuh"

namespace svm::cuda {

// The rows the kernel values come from, class-sorted, ld elements apart: float16 (the
// cheapest that holds the model: docs/SVM_GPU.md) or, where a value does not fit float16,
// float32 in true FP32. norms: |x|² of the rows as stored, in double.
struct WorkingSetRows {
  const __half* X16 = nullptr;
  const float* X32 = nullptr;
  int64_t ld = 0;
  const double* norms = nullptr;
};

// One binary problem: class a's rows [start_a, start_a + na) (+1), then class b's (−1), the
// dual of cpu::solve_dual_working_set: C-SVC is linear −1 from alpha 0 (start null);
// one-class is nb = 0, Cp = 1, linear 0 from one_class_start.
struct WorkingSetPair {
  int64_t start_a = 0, start_b = 0;
  int na = 0, nb = 0;
  double Cp = 1, Cn = 1;
  double linear = -1;
  const double* start = nullptr;  // [na + nb] on the host, feasible; null: alpha 0
};

struct WorkingSetConfig {
  int working_set_size = 1024;  // q (at most 1024: a subproblem is one block's on-chip state)
  int lanes = 0;                // pairs side by side; 0: as many as the memory gives room for
  int64_t budget_bytes = 0;     // device memory for everything the solver allocates
  double tol = 1e-3;
  double inner_gap_share = cpu::kInnerGapShare;  // the subproblems' stopping rule (cpu/working_set.h)
  int inner_steps_per_variable = cpu::kInnerStepsPerVariable;
  int64_t cache_rows = 0;                        // > 0: at most this many cached rows a lane (tests)
  int64_t cache_bytes = -1;  // >= 0: the lanes' cached rows together (--cache-mb), each at least q rows
  KernelType kernel = KernelType::rbf;
  double gamma = 0;
};

struct WorkingSetOutcome {
  std::vector<double> alpha;  // [na + nb]
  PairResult result{};
  int64_t rounds = 0, rows_computed = 0;
  int refreshes = 0;              // float64 gradients taken (refresh_float64 below)
  int64_t refreshed_columns = 0;  // the multipliers' changes they summed
};

struct WorkingSetTotals {
  int lanes = 0;
  int64_t cache_rows_per_lane = 0;  // for the largest pair
  int64_t rounds = 0, rows_computed = 0;
  int64_t refreshes = 0, refreshed_columns = 0;
};

// The stopping test in float64 (docs/SVM_GPU.md, "Kernel values in working sets"). The rounds'
// kernel rows come from float32 sums of float16 products, and at some 10⁵ rows a pair's
// gradient drifts from the problem's by more than tol. So where a lane's own gradient says
// the gap is below tol, the gradient is taken again, its sums in float64,
//
//   G_t = G_ref,t + y_t Σ_s y_s (a_s − a_ref,s) K(x_s, x_t),   a_ref, G_ref ← a, G,
//
// over the multipliers that moved since the last time (all of them the first time, from
// a_ref = 0, G_ref = linear), every dot product summed far beyond float32
// (add_float64_kernel_sums says how), and the rounds go on from it until such a gradient
// itself is below tol, at most kMaxFloat64Refreshes times a pair. So the first costs a pass over the support
// vectors, the later ones over what the rounds after it moved.
constexpr int kMaxFloat64Refreshes = 4;

// G[t] += y_t Σ_{j < count} coef[j] · K(x_{cols[j]}, x_{row(t)}) for t in [0, na + nb) of
// `pair` (row(t): the pair's class-sorted rows), y_t = +1 for t < na else −1; K's dot
// products from the rows as stored, the norms `rows.norms`, and K = the source's
// diagonal (1, or |x|² for linear) where self[j] = t. cols/self/coef are on the device.
// The dot products: float16 rows as int8 slices, thirteen int8 GEMMs summed exactly,
// within 2⁻²⁶ (max|b|·|a|₁ + max|a|·|b|₁) + 2⁻³¹·dim·max|a|·max|b| of the exact dot;
// float32 rows widened, in FP64 GEMMs. scratch: float64_gradient_scratch_bytes(rows, b)
// bytes give blocks of b rows and b columns at least (float16 rows: b rounded up to 16).
int64_t float64_gradient_scratch_bytes(const WorkingSetRows& rows, int64_t block);
void add_float64_kernel_sums(cublasHandle_t blas, const WorkingSetRows& rows, const WorkingSetPair& pair,
                             const int64_t* cols, const int* self, const double* coef, int count, KernelType kernel,
                             double gamma, void* scratch, int64_t scratch_bytes, double* G, cudaStream_t stream);

// Solves every pair; on_pair_done(k) after each (k pairs done so far).
std::vector<WorkingSetOutcome> solve_working_sets(cublasHandle_t blas, const WorkingSetRows& rows,
                                                  const std::vector<WorkingSetPair>& pairs,
                                                  const WorkingSetConfig& config, cudaStream_t stream,
                                                  const std::function<void(int)>& on_pair_done,
                                                  WorkingSetTotals* totals);

// ---- the rows as float16 (svm_gpu.cu makes the working sets' rows with these) --------------

// out[i] = the float16 nearest x[i] (count values); *overflow = 1 when some |x| rounds past
// float16's range (out then unusable).
void rows_to_half(const float* x, int64_t count, __half* out, int* overflow, cudaStream_t stream);
// out[r] = |X[r, :dim]|² in double of float16 rows ld apart.
void half_row_squared_norms(const __half* X, int64_t n, int dim, int64_t ld, double* out, cudaStream_t stream);

}  // namespace svm::cuda
