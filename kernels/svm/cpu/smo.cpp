// Binary C-SVC and the one-class SVM by SMO with second-order working-set selection (Fan,
// Chen & Lin, JMLR 2005, "Working set selection using second order information for training
// SVM"). Both are one dual, min ½ aᵀQa + pᵀa over a box with yᵀa fixed: C-SVC has p = −e and
// starts at a = 0; the one-class problem has p = 0, y = e, and starts at libsvm's feasible
// point (the first ⌊νn⌋ multipliers at 1, the next at the remainder), so that it follows
// libsvm's path.
//
// Notation: G = Qa + p is the gradient of the dual objective. A pair (i, j) moves a_i and
// a_j along the one direction that keeps yᵀa = 0. Index sets:
//   I_up  = { t : a_t < C, y_t = +1  or  a_t > 0, y_t = −1 }   (−y_t G_t can still rise)
//   I_low = { t : a_t < C, y_t = −1  or  a_t > 0, y_t = +1 }
// m(a) = max_{I_up} −y_t G_t,  M(a) = min_{I_low} −y_t G_t; optimal when m − M ≤ 0, and we
// stop at m − M < tol. i maximises −y_t G_t over I_up (first order); j minimises the
// second-order estimate −b²/a of the objective decrease over t ∈ I_low with
// b = m + y_t G_t > 0 and a = K_ii + K_tt − 2 K_it (τ when a ≤ 0).
//
// Ties break towards the later index, and the two-variable step is clipped variable by
// variable, both as libsvm does, so on the same kernel values the iterates follow libsvm's
// path (with shrinking off). There is no shrinking: the pair's kernel matrix is normally in
// memory, so an iteration is three streaming passes over n values and shrinking would
// save little (docs/SVM.md).
#include "kernels/svm/cpu/smo.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "kernels/svm/smo_step.h"

namespace svm::cpu {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

// The dual  min ½ aᵀQa + linear·eᵀa  over the box and yᵀa = const, from a feasible start
// `alpha` (its yᵀa is the constant kept): C-SVC is linear = −1 from a = 0, the one-class
// problem linear = 0 from libsvm's start. The gradient of the start is Q·alpha + linear.
BinaryResult solve_dual(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, double tol, double linear,
                        std::vector<double> alpha, const double* G_start, int64_t max_iter) {
  BinaryResult res;
  std::vector<double> G(n, linear), Kdiag(n), ys(n), Cs(n);
  if (G_start) G.assign(G_start, G_start + n);
  std::vector<uint8_t> in_up(n), in_low(n);
  for (int t = 0; t < n; ++t) {
    Kdiag[t] = K.diag(t);
    ys[t] = y[t] > 0 ? 1.0 : -1.0;
    Cs[t] = y[t] > 0 ? Cp : Cn;
  }
  for (int s = 0; s < n && !G_start; ++s) {
    if (alpha[s] == 0) continue;
    const float* Ks = K.row(s);
    for (int t = 0; t < n; ++t) G[t] += ys[t] * ys[s] * alpha[s] * static_cast<double>(Ks[t]);
  }
  auto classify = [&](int t) {
    const bool at_lower = alpha[t] <= 0, at_upper = alpha[t] >= Cs[t];
    in_up[t] = ys[t] > 0 ? !at_upper : !at_lower;
    in_low[t] = ys[t] > 0 ? !at_lower : !at_upper;
  };
  for (int t = 0; t < n; ++t) classify(t);

  // First pick of i; later picks come out of the gradient-update pass.
  double Gmax = -kInf;
  int i = -1;
  for (int t = 0; t < n; ++t)
    if (in_up[t] && -ys[t] * G[t] >= Gmax) {
      Gmax = -ys[t] * G[t];
      i = t;
    }

  if (max_iter <= 0) max_iter = std::max<int64_t>(10000000, n > INT_MAX / 100 ? INT_MAX : 100LL * n);
  int64_t iter = 0;
  while (i >= 0) {
    const float* Ki = K.row(i);
    // j: best second-order decrease among I_low; Gmax2 = −M(a) for the stopping test.
    double Gmax2 = -kInf, best = kInf;
    int j = -1;
    for (int t = 0; t < n; ++t) {
      if (!in_low[t]) continue;
      const double v = ys[t] * G[t];
      if (v >= Gmax2) Gmax2 = v;
      const double b = Gmax + v;
      if (b > 0) {
        double a = Kdiag[i] + Kdiag[t] - 2.0 * static_cast<double>(Ki[t]);
        if (a <= 0) a = kSmoTau;
        const double decrease = -(b * b) / a;
        if (decrease <= best) {
          best = decrease;
          j = t;
        }
      }
    }
    if (Gmax + Gmax2 < tol || j < 0) break;
    if (iter >= max_iter) {
      res.hit_iteration_limit = true;
      break;
    }
    ++iter;

    const float* Kj = K.row(j);
    const double Kij = Ki[j];
    const double old_ai = alpha[i], old_aj = alpha[j];
    const auto [ai, aj] = smo_pair_step(ys[i] == ys[j], G[i], G[j], old_ai, old_aj, Kdiag[i], Kdiag[j], Kij, Cs[i], Cs[j]);
    alpha[i] = ai;
    alpha[j] = aj;
    classify(i);
    classify(j);

    // G_t += Q_ti Δa_i + Q_tj Δa_j, fused with the next pick of i.
    const double ci = ys[i] * (ai - old_ai), cj = ys[j] * (aj - old_aj);
    Gmax = -kInf;
    int next_i = -1;
    for (int t = 0; t < n; ++t) {
      const double g = G[t] + ys[t] * (ci * static_cast<double>(Ki[t]) + cj * static_cast<double>(Kj[t]));
      G[t] = g;
      if (in_up[t] && -ys[t] * g >= Gmax) {
        Gmax = -ys[t] * g;
        next_i = t;
      }
    }
    i = next_i;
  }

  finish_dual(y, n, Cp, Cn, linear, G.data(), alpha.data(), res);
  res.iterations = iter;
  res.alpha = std::move(alpha);
  return res;
}

void finish_dual(const int8_t* y, int n, double Cp, double Cn, double linear, const double* G, const double* alpha,
                 BinaryResult& res) {
  // rho: the mean of y_t G_t over free vectors (each equals rho at the optimum); without
  // free vectors the midpoint of the interval the bounded ones leave for it.
  double ub = kInf, lb = -kInf, free_sum = 0, obj = 0;
  int64_t n_free = 0;
  for (int t = 0; t < n; ++t) {
    const double ys = y[t] > 0 ? 1.0 : -1.0, C = y[t] > 0 ? Cp : Cn;
    const double yG = ys * G[t];
    const bool at_upper = alpha[t] >= C, at_lower = alpha[t] <= 0;
    if (at_upper) {
      if (ys < 0) ub = std::min(ub, yG); else lb = std::max(lb, yG);
    } else if (at_lower) {
      if (ys > 0) ub = std::min(ub, yG); else lb = std::max(lb, yG);
    } else {
      ++n_free;
      free_sum += yG;
    }
    obj += alpha[t] * (G[t] + linear);
  }
  res.rho = n_free > 0 ? free_sum / static_cast<double>(n_free) : (ub + lb) / 2;
  res.objective = obj / 2;
}

BinaryResult solve_binary(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, double tol) {
  return solve_dual(K, y, n, Cp, Cn, tol, -1.0, std::vector<double>(static_cast<size_t>(n), 0.0));
}

std::vector<double> one_class_start(int n, double nu) {
  std::vector<double> alpha(static_cast<size_t>(n), 0.0);
  const int at_bound = static_cast<int>(nu * n);
  for (int t = 0; t < at_bound; ++t) alpha[t] = 1.0;
  if (at_bound < n) alpha[at_bound] = nu * n - at_bound;
  return alpha;
}

BinaryResult solve_one_class(KernelRows& K, int n, double nu, double tol) {
  const std::vector<int8_t> ones(static_cast<size_t>(n), int8_t{1});
  return solve_dual(K, ones.data(), n, 1.0, 1.0, tol, 0.0, one_class_start(n, nu));
}

}  // namespace svm::cpu
