#include "tests/support/svm_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace svm::cpu {

double kernel_reference(const KernelSpec& k, const float* a, const float* b, int dim) {
  if (k.type == KernelType::linear) {
    double s = 0;
    for (int f = 0; f < dim; ++f) s += static_cast<double>(a[f]) * b[f];
    return s;
  }
  double d2 = 0;
  for (int f = 0; f < dim; ++f) {
    double d = static_cast<double>(a[f]) - b[f];
    d2 += d * d;
  }
  return std::exp(-k.gamma * d2);
}

namespace {
// G = Qa + linear, then m(a) − M(a) over I_up and I_low.
double kkt_gap_dual(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, double linear,
                    const std::vector<double>& alpha) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> G(n, linear);
  for (int s = 0; s < n; ++s) {
    if (alpha[s] == 0) continue;
    const float* Ks = K.row(s);
    const double ys = y[s] > 0 ? 1.0 : -1.0;
    for (int t = 0; t < n; ++t) G[t] += (y[t] > 0 ? 1.0 : -1.0) * ys * alpha[s] * static_cast<double>(Ks[t]);
  }
  double m = -kInf, M = kInf;
  for (int t = 0; t < n; ++t) {
    const double yt = y[t] > 0 ? 1.0 : -1.0, v = -yt * G[t];
    const bool at_lower = alpha[t] <= 0, at_upper = alpha[t] >= (yt > 0 ? Cp : Cn);
    const bool up = yt > 0 ? !at_upper : !at_lower, low = yt > 0 ? !at_lower : !at_upper;
    if (up) m = std::max(m, v);
    if (low) M = std::min(M, v);
  }
  return m - M;
}
}  // namespace

double kkt_gap(KernelRows& K, const int8_t* y, int n, double Cp, double Cn, const std::vector<double>& alpha) {
  return kkt_gap_dual(K, y, n, Cp, Cn, -1.0, alpha);
}

double kkt_gap_one_class(KernelRows& K, int n, const std::vector<double>& alpha) {
  const std::vector<int8_t> ones(static_cast<size_t>(n), int8_t{1});
  return kkt_gap_dual(K, ones.data(), n, 1.0, 1.0, 0.0, alpha);
}

}  // namespace svm::cpu
