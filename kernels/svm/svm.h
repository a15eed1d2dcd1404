// Multiclass (one-vs-one) C-SVM with RBF or linear kernel — the device seam.
//
// The model is held in libsvm's layout so it can be exported to libsvm's own tools:
// classes sorted ascending, support vectors grouped by class, dual_coef[(k-1) x n_sv],
// rho[k(k-1)/2] in pair order (0,1),(0,2),...,(1,2),...; decision > 0 votes for the
// first class of the pair. Inputs are already scaled and feature-masked by the caller.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/large_buffer.h"

namespace svm {

enum class KernelType { rbf, linear };
const char* kernel_name(KernelType k);

// c_svc: the one-vs-one multiclass C-SVM (libsvm's -s 0). one_class: the one-class SVM
// (libsvm's -s 2), which ignores labels and estimates the support of the training rows: its
// one decision value is > 0 inside, < 0 outside.
enum class SvmKind { c_svc, one_class };
const char* kind_name(SvmKind k);
// "c-svc" or "one-class" (kind_name's spelling); std::invalid_argument otherwise.
SvmKind parse_kind(const std::string& name);

// Per-class multipliers of C, by label (libsvm's -wi, scikit-learn's class_weight): the
// binary problem of pair (a, b) bounds class a's coefficients by C·w_a and b's by C·w_b. A
// label not listed weighs 1.
using ClassWeights = std::map<int32_t, double>;
double class_weight(const ClassWeights& weights, int32_t label);

struct FitParams {
  KernelType kernel = KernelType::rbf;
  double C = 10.0;  // c_svc
  double gamma = 0.0;  // resolved value (> 0 for rbf)
  double tol = 1e-3;   // KKT tolerance, as libsvm's -e
  ClassWeights class_weight;
  int64_t cache_mb = 2048;  // the CPU's kernel values, MB (svm-fit --cache-mb, or its default)
  // The GPU's kernel values, MB: svm-fit --cache-mb when given; 0: what the device has free.
  // Two fields because only the CPU's bound has a default of its own (default_cache_mb).
  int64_t gpu_cache_mb = 0;
  bool log_summary = true;  // the solver's one-line summary (cross-validation's many fits turn it off)
  SvmKind kind = SvmKind::c_svc;
  double nu = 0.5;  // one_class: 0 < nu <= 1, an upper bound on the fraction of training rows outside
};

// A one_class model has no classes: n_support {n_sv}, dual_coef [1, n_sv] (each support
// vector's multiplier, all > 0), rho [1], and one decision value per row.
struct Model {
  SvmKind kind = SvmKind::c_svc;
  KernelType kernel = KernelType::rbf;
  double gamma = 0.0;
  int dim = 0;                           // features per vector (after masking)
  std::vector<int> classes;              // labels, ascending
  std::vector<int> n_support;            // per class
  cae::LargeVector<float> support_vectors;  // [n_sv, dim], grouped by class
  std::vector<int64_t> support_indices;  // row in the training set of each SV
  std::vector<double> dual_coef;         // [(k-1), n_sv]
  std::vector<double> rho;               // [k(k-1)/2]
  int64_t n_sv() const { return static_cast<int64_t>(support_indices.size()); }
  int n_pairs() const { return static_cast<int>(classes.size() * (classes.size() - 1) / 2); }
  // Decision values per row: n_pairs(), or 1 for one_class.
  int n_decisions() const { return kind == SvmKind::one_class ? 1 : n_pairs(); }
};

// pairs_done of pairs_total, for progress bars.
using PairCallback = std::function<void(int pairs_done, int pairs_total)>;

// X: [n, dim] row-major float32; y: n labels (at least two distinct classes).
Model fit_cpu(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, const PairCallback& cb);
Model fit_gpu(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, const PairCallback& cb);
// fit_gpu for each C of `Cs` (p.C ignored): the same models as one fit_gpu per C, from one
// kernel matrix — cross-validation solves every C of a (fold, gamma) this way.
std::vector<Model> fit_gpu_each_C(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                                  const std::vector<double>& Cs);

// The one-class SVM on the CPU (p.kind must be one_class; p.nu, p.gamma, p.tol, p.cache_mb
// are used): libsvm's svm-train -s 2 on the same rows gives the same support vectors,
// multipliers and rho.
Model fit_one_class_cpu(const float* X, int64_t n, int dim, const FitParams& p);
// The same on the GPU, with the n x n kernel matrix in device memory (std::runtime_error
// when it does not fit): the same iterations as the CPU on the same kernel values.
Model fit_one_class_gpu(const float* X, int64_t n, int dim, const FitParams& p);
// What both do first and last: check p (std::invalid_argument) and fill kind, kernel, gamma
// and dim; then the support vectors (alpha_t > 0, in row order) of the solution.
Model begin_one_class_fit(int64_t n, int dim, const FitParams& p);
void set_one_class_solution(Model& m, const float* X, const std::vector<double>& alpha, double rho);

// Decision values [n, m.n_decisions()]: for c_svc in libsvm's pair order; for one_class
// Σ a_t K(x_t, x) − rho, > 0 inside the support (libsvm's svm-predict says +1), else outside (−1). The CPU computes them in blocks of
// decision_block_rows(m) rows, one sgemm each; a caller that splits the rows (a group of
// ranks) cuts at multiples of it, so every sgemm has the shape one process gives it and the
// values are the same bits (BLAS kernels round differently at other tile edges).
int64_t decision_block_rows(const Model& m);
// What both devices compute decision values over, after checking the model's arrays agree
// (std::invalid_argument "svm: inconsistent model" otherwise): k classes and start[c], the
// first support vector of class c (start[k] = n_sv), and how many decision values a row
// has (m.n_decisions()). A one_class model is the pair (0, 1) of two classes whose second
// has no vectors: its value is row 0 of the coefficients against every vector, minus rho —
// the c_svc formula for that pair.
struct DecisionLayout {
  int k = 0;
  std::vector<int64_t> start;  // [k + 1]
  int64_t n_sv = 0;
  int pairs = 0;
};
DecisionLayout decision_layout(const Model& m);
void decision_values_cpu(const Model& m, const float* X, int64_t n, double* dec);
void decision_values_gpu(const Model& m, const float* X, int64_t n, double* dec);

// What every solver does first: checks the parameters (std::invalid_argument), fills the
// model's kernel, gamma, dim and sorted distinct classes (at least two), and lists each
// class's training rows in `members` (ascending). Shared by fit_cpu and fit_gpu.
Model begin_fit(const int32_t* y, int64_t n, int dim, const FitParams& p, std::vector<std::vector<int64_t>>& members);

// A fit in pieces, for a group of ranks that share its class pairs (group_fit.h): each rank
// solves some pairs (the binary problem of pair q exactly as a whole fit solves it), one
// assembles libsvm's layout from all of them. fit_cpu is solve_pairs_cpu over every pair,
// then assemble_model.
struct PairSolution {
  int pair = -1;              // index in libsvm's pair order
  std::vector<double> alpha;  // [n_a + n_b]: class a's rows, then class b's, in row order
  double rho = 0;
  int64_t iterations = 0;
  bool hit_iteration_limit = false;
};
// `pairs`: the pair indices to solve (any order); cb counts them.
std::vector<PairSolution> solve_pairs_cpu(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                                          const std::vector<int>& pairs, const PairCallback& cb);
// On the GPU, for every C of `Cs` (p.C ignored): [C][solution], from one kernel matrix.
std::vector<std::vector<PairSolution>> solve_pairs_gpu(const float* X, const int32_t* y, int64_t n, int dim,
                                                       const FitParams& p, const std::vector<double>& Cs,
                                                       const std::vector<int>& pairs, const PairCallback& cb);
// libsvm's model from every pair's solution (any order, each pair once; std::invalid_argument
// otherwise). X, y, n, dim, p as given to the solves.
Model assemble_model(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p,
                     std::vector<PairSolution> solutions);
// assemble_model without the support vectors' rows (support_vectors left empty): for a
// caller that makes them itself (fit_gpu_prepared, from rows the host never scaled).
Model assemble_model_layout(const int32_t* y, int64_t n, int dim, const FitParams& p,
                            std::vector<PairSolution> solutions);

// threads > 0: the threads of the CPU solver and predictions (OpenMP's and OpenBLAS's
// pools); svm-fit --threads, and each rank of a group its share of the cores.
void set_cpu_threads(int threads);

// One-class predictions as libsvm gives them: +1 where dec > 0 (inside), else −1.
std::vector<int32_t> one_class_labels(const double* dec, int64_t n);

// One-vs-one voting on decision values, ties to the smaller class index (as libsvm).
std::vector<int32_t> vote(const Model& m, const double* dec, int64_t n);

}  // namespace svm
