// Decision values and one-vs-one voting on the CPU. The kernel values between a block of
// inputs and all support vectors are one sgemm (kernels/svm/cpu/kernel.h); each pair's
// decision value then sums its two classes' coefficients, in libsvm's order (a one-class
// model: every support vector's coefficient).
#include <algorithm>
#include <stdexcept>

#include "kernels/svm/cpu/kernel.h"
#include "kernels/svm/svm.h"

namespace svm {

// ~64 MB of kernel values per block.
int64_t decision_block_rows(const Model& m) {
  return std::clamp<int64_t>((int64_t{16} << 20) / std::max<int64_t>(m.n_sv(), 1), 16, 4096);
}

DecisionLayout decision_layout(const Model& m) {
  const bool one_class = m.kind == SvmKind::one_class;
  const std::vector<int> n_support =
      one_class && m.classes.empty() && m.n_support.size() == 1 ? std::vector<int>{m.n_support[0], 0} : m.n_support;
  DecisionLayout layout;
  layout.k = one_class ? 2 : static_cast<int>(m.classes.size());
  const int k = layout.k;
  const int64_t n_sv = m.n_sv();
  if (k < 2 || static_cast<int>(n_support.size()) != k ||
      static_cast<int64_t>(m.dual_coef.size()) != (k - 1) * n_sv || static_cast<int>(m.rho.size()) != m.n_decisions() ||
      static_cast<int64_t>(m.support_vectors.size()) != n_sv * m.dim)
    throw std::invalid_argument("svm: inconsistent model");
  layout.start.assign(static_cast<size_t>(k) + 1, 0);
  for (int c = 0; c < k; ++c) {
    if (n_support[c] < 0) throw std::invalid_argument("svm: inconsistent model");
    layout.start[c + 1] = layout.start[c] + n_support[c];
  }
  if (layout.start[k] != n_sv) throw std::invalid_argument("svm: inconsistent model");
  layout.n_sv = n_sv;
  layout.pairs = m.n_decisions();
  return layout;
}

void decision_values_cpu(const Model& m, const float* X, int64_t n, double* dec) {
  using namespace cpu;
  const auto [k, start, n_sv, pairs] = decision_layout(m);

  const KernelSpec spec{m.kernel, m.gamma};
  std::vector<double> sv_norms(static_cast<size_t>(n_sv));
  row_squared_norms(m.support_vectors.data(), n_sv, m.dim, sv_norms.data());
  const int64_t block = decision_block_rows(m);
  std::vector<float> Kb(static_cast<size_t>(std::min(block, std::max<int64_t>(n, 1)) * std::max<int64_t>(n_sv, 1)));
  std::vector<double> x_norms(static_cast<size_t>(block));
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t rows = std::min(block, n - r0);
    row_squared_norms(X + r0 * m.dim, rows, m.dim, x_norms.data());
    kernel_block(spec, X + r0 * m.dim, rows, x_norms.data(), m.support_vectors.data(), n_sv, sv_norms.data(), m.dim,
                 Kb.data(), n_sv);
#pragma omp parallel for schedule(static) if (rows * n_sv * k >= kMinParallelWork)
    for (int64_t r = 0; r < rows; ++r) {
      const float* kv = Kb.data() + r * n_sv;
      double* out = dec + (r0 + r) * pairs;
      int p = 0;
      for (int a = 0; a < k; ++a)
        for (int b = a + 1; b < k; ++b, ++p) {
          const double* coef_a = m.dual_coef.data() + (b - 1) * n_sv;  // class a's vectors, pair (a,b)
          const double* coef_b = m.dual_coef.data() + a * n_sv;        // class b's vectors
          double s = 0;
          for (int64_t v = start[a]; v < start[a + 1]; ++v) s += coef_a[v] * kv[v];
          for (int64_t v = start[b]; v < start[b + 1]; ++v) s += coef_b[v] * kv[v];
          out[p] = s - m.rho[p];
        }
    }
  }
}

std::vector<int32_t> one_class_labels(const double* dec, int64_t n) {
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) labels[r] = dec[r] > 0 ? 1 : -1;
  return labels;
}

std::vector<int32_t> vote(const Model& m, const double* dec, int64_t n) {
  const int k = static_cast<int>(m.classes.size());
  const int pairs = m.n_pairs();
  std::vector<int32_t> pred(static_cast<size_t>(n));
#pragma omp parallel if (n * pairs >= cpu::kMinParallelWork)
  {
    std::vector<int> votes(k);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      std::fill(votes.begin(), votes.end(), 0);
      const double* d = dec + r * pairs;
      int p = 0;
      for (int a = 0; a < k; ++a)
        for (int b = a + 1; b < k; ++b, ++p) ++votes[d[p] > 0 ? a : b];
      int best = 0;
      for (int c = 1; c < k; ++c)
        if (votes[c] > votes[best]) best = c;  // ties go to the smaller class index
      pred[r] = m.classes[best];
    }
  }
  return pred;
}

}  // namespace svm
