// The SVM's work shared by a group of ranks (docs/MULTI_GPU.md, "svm-fit on a group").
//
// A one-vs-one fit is k(k−1)/2 independent binary problems: each rank solves its share of
// the pairs (balance_pairs), sends the solutions to rank 0 through the group's exchange,
// and rank 0 assembles libsvm's model from them exactly as a one-process fit does
// (assemble_model). Each pair is solved by the code and on the rows a one-process fit uses,
// so on the CPU the model is the one-process model bit for bit; on GPUs likewise, since
// every rank builds the same kernel matrix one GPU would.
#pragma once
#include <cstdint>
#include <vector>

#include "common/device.h"
#include "common/group.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/svm.h"

namespace svm {

// The pairs (libsvm's pair order numbers) each of `world` ranks solves, from the classes'
// row counts, the rows' features `dim` and each pair's SMO difficulty (pair_difficulty; empty:
// all alike), dealt so that the slowest rank's cost under the deal's cost model (deal_costs)
// is small: a rank computes the diagonal kernel block K_cc of every class c its pairs touch,
// once, so pairs of the same classes are kept together where that pays (docs/DECISIONS.md,
// "A class-aware deal of the class pairs"). Greedy largest first, then a bounded local search
// (moving a pair, all of a rank's pairs of one class, or swapping two pairs), every choice in
// a fixed order with ties to the lower pair and rank: the same answer on every rank given the
// same arguments. Each rank's list is ascending.
std::vector<std::vector<int>> balance_pairs(const std::vector<int64_t>& class_sizes, int dim, int world,
                                            const std::vector<double>& difficulty = {});

// Each rank's cost under the deal's model, in units of one diagonal block's cost per n_c² · dim:
// the K_cc of each class c a rank touches (one ssyrk), and for each pair (a, b) its K_ab
// (sgemm), the copies of K_aa and K_bb into the pair matrix and its SMO, (n_a + n_b)² times the
// pair's difficulty over the pairs' mean difficulty.
std::vector<double> deal_costs(const std::vector<int64_t>& class_sizes, int dim,
                               const std::vector<std::vector<int>>& deal, const std::vector<double>& difficulty = {});

// How hard each pair's SMO is, relative to the others: its classes' separation
// ‖μ_a − μ_b‖² / (v_a + v_b) (μ_c a class's mean row, v_c its mean squared distance to it)
// to the power −1.5, over at most kDifficultyRows rows of each class taken at even steps.
// Closer classes need more SMO iterations. Plain sums in row order on one thread, so every
// rank computes the same numbers from the same rows.
constexpr int64_t kDifficultyRows = 1000;
std::vector<double> pair_difficulty(const float* X, int dim, const std::vector<std::vector<int64_t>>& members);

// fit_cpu / fit_gpu (device) on a group: this rank's pairs, then the gather. Rank 0 returns
// the whole model; the other ranks return a model without support vectors (only classes,
// kernel, gamma, dim), which they must not save. With world 1: the plain fit.
// `cb` counts this rank's pairs.
Model fit_on_group(const float* X, const int32_t* y, int64_t n, int dim, const FitParams& p, cae::Device device,
                   cae::GroupExchange& group, const PairCallback& cb = {});

// The contiguous share [first, first + count) of `total` items that rank `rank` of `world`
// takes (sizes differ by at most one, the larger shares first).
struct Share {
  int64_t first = 0, count = 0;
};
Share share_of(int64_t total, int rank, int world);

// Classifier::decision_values_scaled then average_views, on a group: X holds `views`
// blocks of n scaled rows (row i + j·n: view j of image i); rank r computes a contiguous
// share of the images, in whole blocks of decision_block_rows, and their other views, rank 0 gathers every rank's [count, pairs]
// in rank order and returns [n, pairs] — the values one process computes. The other
// ranks return an empty list. X is scratch, as for decision_values_scaled.
std::vector<double> decision_values_on_group(const Classifier& clf, float* X, int64_t n, int views,
                                             cae::Device device, cae::GroupExchange& group);

// Solutions in bytes and back; from_bytes checks every size against the bytes there.
std::vector<unsigned char> solutions_to_bytes(const std::vector<PairSolution>& s);
std::vector<PairSolution> solutions_from_bytes(const std::vector<unsigned char>& b, const std::string& name);

}  // namespace svm
