#include "kernels/svm/probability.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "common/error.h"
#include "common/group.h"
#include "common/log.h"
#include "common/timer.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/model_selection.h"
#include "kernels/svm/resumable_units.h"

namespace svm {

// Transcribed from libsvm 3.24's svm.cpp (sigmoid_train), variable names kept so the two can
// be read side by side.
void sigmoid_train(int64_t l, const double* dec_values, const double* labels, double& A, double& B) {
  double prior1 = 0, prior0 = 0;
  for (int64_t i = 0; i < l; i++)
    if (labels[i] > 0) prior1 += 1;
    else prior0 += 1;

  const int max_iter = 100;      // maximal number of iterations
  const double min_step = 1e-10;  // minimal step taken in line search
  const double sigma = 1e-12;     // for numerically strict PD of Hessian
  const double eps = 1e-5;
  // Platt's targets, smoothed toward the priors: a rows-are-certain fit would overfit.
  const double hiTarget = (prior1 + 1.0) / (prior1 + 2.0);
  const double loTarget = 1 / (prior0 + 2.0);
  std::vector<double> t(static_cast<size_t>(l));

  // Initial point and initial function value.
  A = 0.0;
  B = std::log((prior0 + 1.0) / (prior1 + 1.0));
  double fval = 0.0;
  for (int64_t i = 0; i < l; i++) {
    t[i] = labels[i] > 0 ? hiTarget : loTarget;
    const double fApB = dec_values[i] * A + B;
    // Both branches are log(1 + exp(.)) written so that exp never overflows.
    if (fApB >= 0)
      fval += t[i] * fApB + std::log(1 + std::exp(-fApB));
    else
      fval += (t[i] - 1) * fApB + std::log(1 + std::exp(fApB));
  }
  int iter;
  for (iter = 0; iter < max_iter; iter++) {
    // Update gradient and Hessian (use H' = H + sigma I).
    double h11 = sigma, h22 = sigma, h21 = 0.0, g1 = 0.0, g2 = 0.0;
    for (int64_t i = 0; i < l; i++) {
      const double fApB = dec_values[i] * A + B;
      double p, q;
      if (fApB >= 0) {
        p = std::exp(-fApB) / (1.0 + std::exp(-fApB));
        q = 1.0 / (1.0 + std::exp(-fApB));
      } else {
        p = 1.0 / (1.0 + std::exp(fApB));
        q = std::exp(fApB) / (1.0 + std::exp(fApB));
      }
      const double d2 = p * q;
      h11 += dec_values[i] * dec_values[i] * d2;
      h22 += d2;
      h21 += dec_values[i] * d2;
      const double d1 = t[i] - p;
      g1 += dec_values[i] * d1;
      g2 += d1;
    }
    if (std::fabs(g1) < eps && std::fabs(g2) < eps) break;  // stopping criterion

    // Newton direction: -inv(H') * g.
    const double det = h11 * h22 - h21 * h21;
    const double dA = -(h22 * g1 - h21 * g2) / det;
    const double dB = -(-h21 * g1 + h11 * g2) / det;
    const double gd = g1 * dA + g2 * dB;

    double stepsize = 1;  // line search
    while (stepsize >= min_step) {
      const double newA = A + stepsize * dA, newB = B + stepsize * dB;
      double newf = 0.0;
      for (int64_t i = 0; i < l; i++) {
        const double fApB = dec_values[i] * newA + newB;
        if (fApB >= 0)
          newf += t[i] * fApB + std::log(1 + std::exp(-fApB));
        else
          newf += (t[i] - 1) * fApB + std::log(1 + std::exp(fApB));
      }
      if (newf < fval + 0.0001 * stepsize * gd) {  // sufficient decrease
        A = newA;
        B = newB;
        fval = newf;
        break;
      }
      stepsize = stepsize / 2.0;
    }
    if (stepsize < min_step) {
      cae::log_info("line search fails in two-class probability estimates");
      break;
    }
  }
  if (iter >= max_iter) cae::log_info("reaching maximal iterations in two-class probability estimates");
}

double sigmoid_predict(double decision_value, double A, double B) {
  const double fApB = decision_value * A + B;
  // 1 - p is used later; this avoids catastrophic cancellation.
  if (fApB >= 0) return std::exp(-fApB) / (1.0 + std::exp(-fApB));
  return 1.0 / (1 + std::exp(fApB));
}

// libsvm's multiclass_probability ("method 2" of Wu, Lin & Weng): the p minimising
// Σ_i Σ_{j≠i} (r_ji p_i − r_ij p_j)² on the simplex, by its fixed-point iteration.
void multiclass_probability(int k, const double* r, double* p) {
  auto R = [&](int i, int j) { return r[static_cast<size_t>(i) * k + j]; };
  const int max_iter = std::max(100, k);
  std::vector<double> Q(static_cast<size_t>(k) * k), Qp(static_cast<size_t>(k));
  auto q = [&](int i, int j) -> double& { return Q[static_cast<size_t>(i) * k + j]; };
  const double eps = 0.005 / k;

  for (int t = 0; t < k; t++) {
    p[t] = 1.0 / k;  // valid if k = 1
    q(t, t) = 0;
    for (int j = 0; j < t; j++) {
      q(t, t) += R(j, t) * R(j, t);
      q(t, j) = q(j, t);
    }
    for (int j = t + 1; j < k; j++) {
      q(t, t) += R(j, t) * R(j, t);
      q(t, j) = -R(j, t) * R(t, j);
    }
  }
  int iter;
  for (iter = 0; iter < max_iter; iter++) {
    // Stopping condition; Qp and pQp recomputed for numerical accuracy.
    double pQp = 0;
    for (int t = 0; t < k; t++) {
      Qp[t] = 0;
      for (int j = 0; j < k; j++) Qp[t] += q(t, j) * p[j];
      pQp += p[t] * Qp[t];
    }
    double max_error = 0;
    for (int t = 0; t < k; t++) {
      const double error = std::fabs(Qp[t] - pQp);
      if (error > max_error) max_error = error;
    }
    if (max_error < eps) break;

    for (int t = 0; t < k; t++) {
      const double diff = (-Qp[t] + pQp) / q(t, t);
      p[t] += diff;
      pQp = (pQp + diff * (diff * q(t, t) + 2 * Qp[t])) / (1 + diff) / (1 + diff);
      for (int j = 0; j < k; j++) {
        Qp[j] = (Qp[j] + diff * q(t, j)) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
  if (iter >= max_iter) cae::log_info("exceeds max_iter in multiclass_prob");
}

std::vector<double> probabilities_from_decisions(const std::vector<double>& dec, int64_t n, int k,
                                                 const std::vector<double>& A, const std::vector<double>& B) {
  const size_t pairs = static_cast<size_t>(k) * (k - 1) / 2;
  if (k < 2 || A.size() != pairs || B.size() != pairs || dec.size() != static_cast<size_t>(n) * pairs)
    throw std::invalid_argument("probabilities: decision values, A and B do not match " + std::to_string(k) +
                                " classes and " + std::to_string(n) + " rows");
  std::vector<double> prob(static_cast<size_t>(n) * k);
  // svm_predict_probability clips the pairwise probabilities away from 0 and 1 so that the
  // coupling's Q stays positive definite.
  const double min_prob = 1e-7;
#pragma omp parallel for schedule(static) if (n >= 256)
  for (int64_t row = 0; row < n; ++row) {
    std::vector<double> r(static_cast<size_t>(k) * k, 0.0);
    const double* d = dec.data() + static_cast<size_t>(row) * pairs;
    for (int i = 0, q = 0; i < k; i++)
      for (int j = i + 1; j < k; j++, q++) {
        const double rij = std::min(std::max(sigmoid_predict(d[q], A[q], B[q]), min_prob), 1 - min_prob);
        r[static_cast<size_t>(i) * k + j] = rij;
        r[static_cast<size_t>(j) * k + i] = 1 - rij;
      }
    double* p = prob.data() + static_cast<size_t>(row) * k;
    if (k == 2) {  // libsvm 3.24: the pair's sigmoid is the answer, no coupling
      p[0] = r[1];
      p[1] = r[2];
    } else {
      multiclass_probability(k, r.data(), p);
    }
  }
  return prob;
}

void check_sigmoid_data(const int32_t* y, int64_t images, const std::string& data_name) {
  std::map<int32_t, int64_t> count;
  for (int64_t i = 0; i < images; ++i) ++count[y[i]];
  // Every fold's training part must hold every class, so that each fold's model has every
  // pair and its decision values line up with the final model's.
  for (const auto& [label, c] : count)
    if (c < 2)
      cae::fail_file(data_name, "class " + std::to_string(label) + " has " + std::to_string(c) +
                                    " training image; --probability needs at least 2 of every class");
}

namespace {

// The distinct labels of the first `images` rows, ascending: the classes every fold's model
// has (check_sigmoid_data), in its decision values' pair order.
std::vector<int32_t> classes_of(const int32_t* y, int64_t images) {
  std::vector<int32_t> classes(y, y + images);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  return classes;
}

// Fold f's held-out images (their row numbers) and, for every C of Cs, their decision values
// [rows, pairs] from a fit of `params` on the fold's training rows. The fold's rows are
// prepared once for every C; `fr` is scratch reused from fold to fold.
struct FoldDecisions {
  std::vector<int64_t> rows;
  std::vector<std::vector<double>> dec;  // [Cs.size()]
};
FoldDecisions fold_decisions(const FoldSplit& split, int f, int folds, int dim, const ClassifierParams& params,
                             const std::vector<double>& Cs, const std::vector<int32_t>& classes, cae::Device device,
                             FoldRows& fr) {
  split.rows(f, fr);
  FoldDecisions out;
  out.rows = fr.held_rows;
  if (fr.held_rows.empty()) return out;  // fewer images than folds
  ClassifierParams p = params;
  p.log_summary = false;
  p.group = nullptr;  // the fold is this rank's alone
  p.data_name = params.data_name + " (probability fold " + std::to_string(f + 1) + " of " + std::to_string(folds) + ")";
  const PreparedSet rows(fr.train_X.data(), fr.train_y.data(), fr.n_train(), dim, p);
  const PreparedQueries held = rows.prepare_queries(fr.held_X.data(), fr.n_held());
  for (const Classifier& clf : rows.fit_each_C(p, Cs, device)) {
    if (clf.model().classes != classes)
      throw std::logic_error("fit_sigmoids: a fold's model lacks a class");  // ruled out by the count check
    out.dec.push_back(clf.decision_values(held, device));
  }
  return out;
}

// sigmoid_train per pair on the images' cross-validated decision values cv_dec [images,
// pairs]: the rows of its two classes, class a's rows then class b's, in row order.
void fit_pair_sigmoids(const std::vector<double>& cv_dec, const int32_t* y, int64_t images,
                       const std::vector<int32_t>& classes, Sigmoids& s) {
  const int k = static_cast<int>(classes.size());
  const int pairs = k * (k - 1) / 2;
  s.A.resize(pairs);
  s.B.resize(pairs);
  std::vector<std::vector<int64_t>> members(k);
  for (int64_t i = 0; i < images; ++i)
    members[std::lower_bound(classes.begin(), classes.end(), y[i]) - classes.begin()].push_back(i);
  std::vector<double> dec, label;
  for (int a = 0, q = 0; a < k; ++a)
    for (int b = a + 1; b < k; ++b, ++q) {
      dec.clear();
      label.clear();
      for (int c : {a, b})
        for (int64_t i : members[c]) {
          dec.push_back(cv_dec[static_cast<size_t>(i) * pairs + q]);
          label.push_back(c == a ? +1.0 : -1.0);
        }
      sigmoid_train(static_cast<int64_t>(dec.size()), dec.data(), label.data(), s.A[q], s.B[q]);
    }
}

}  // namespace

Sigmoids fit_sigmoids(const float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                      int folds, uint64_t seed, cae::Device device, int views, const SigmoidProgress& progress,
                      UnitLog* log) {
  cae::Stopwatch clock;
  const FoldSplit split(X, y, n, dim, views, folds, seed);
  const int64_t images = split.images();
  check_sigmoid_data(y, images, params.data_name);
  const std::vector<int32_t> classes = classes_of(y, images);
  const int k = static_cast<int>(classes.size());
  const int pairs = k * (k - 1) / 2;

  // Decision values of each image's first view, from the fold that held it out.
  std::vector<double> cv_dec(static_cast<size_t>(images) * pairs);
  // On a group each rank takes a contiguous share of the folds and sends rank 0 its held-out
  // rows' decision values; rank 0 alone fits the sigmoids. A fold's record: its held-out
  // rows and their decision values (resume.h).
  ResumableUnits units(folds, params.group, log);
  const Share share = units.share();
  FoldRows fr;
  for (int f = static_cast<int>(share.first); f < static_cast<int>(share.first + share.count); ++f) {
    const auto report = [&] {
      if (progress) progress(static_cast<int>(f + 1 - share.first), static_cast<int>(share.count));
    };
    if (units.replay(f)) {
      report();
      continue;
    }
    if (units.stop_now()) break;
    const FoldDecisions fold = fold_decisions(split, f, folds, dim, params, {params.C}, classes, device, fr);
    if (fold.rows.empty()) continue;
    cae::ByteWriter record;
    record.put_vector(fold.rows);
    record.put_vector(fold.dec.front());
    units.computed(f, record.bytes());
    report();
  }
  if (!units.exchange("sigmoids", ResumableUnits::Results::lead_only, "probability folds", "fold")) return Sigmoids{};
  const std::map<int64_t, std::vector<unsigned char>>& records = units.records();
  for (const auto& [f, bytes] : records) {
    cae::ByteReader in(bytes, "the decision values of probability fold " + std::to_string(f + 1));
    const std::vector<int64_t> rows = in.get_vector<int64_t>();
    const std::vector<double> dec = in.get_vector<double>();
    if (!in.done() || dec.size() != rows.size() * static_cast<size_t>(pairs))
      in.fail("decision values do not match the rows");
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < 0 || rows[i] >= images) in.fail("a row outside the training images");
      std::copy_n(dec.data() + i * pairs, pairs, cv_dec.data() + rows[i] * pairs);
    }
  }

  Sigmoids s;
  s.folds = folds;
  s.seed = seed;
  fit_pair_sigmoids(cv_dec, y, images, classes, s);
  s.seconds = clock.seconds();
  return s;
}

std::vector<Sigmoids> fit_sigmoids_each_C(const float* X, const int64_t* x_rows, const int32_t* y, int64_t n,
                                          int dim, const ClassifierParams& params, const std::vector<double>& Cs,
                                          int folds, uint64_t seed, cae::Device device, int views) {
  cae::Stopwatch clock;
  const FoldSplit split(X, x_rows, y, n, dim, views, folds, seed);
  const int64_t images = split.images();
  check_sigmoid_data(y, images, params.data_name);
  const std::vector<int32_t> classes = classes_of(y, images);
  const size_t pairs = classes.size() * (classes.size() - 1) / 2;
  std::vector<std::vector<double>> cv_dec(Cs.size(), std::vector<double>(static_cast<size_t>(images) * pairs));
  FoldRows fr;
  for (int f = 0; f < folds; ++f) {
    const FoldDecisions fold = fold_decisions(split, f, folds, dim, params, Cs, classes, device, fr);
    for (size_t c = 0; c < fold.dec.size(); ++c)
      for (size_t i = 0; i < fold.rows.size(); ++i)
        std::copy_n(fold.dec[c].data() + i * pairs, pairs, cv_dec[c].data() + fold.rows[i] * pairs);
  }
  std::vector<Sigmoids> out(Cs.size());
  for (size_t c = 0; c < Cs.size(); ++c) {
    out[c].folds = folds;
    out[c].seed = seed;
    fit_pair_sigmoids(cv_dec[c], y, images, classes, out[c]);
    out[c].seconds = clock.seconds();
  }
  return out;
}

}  // namespace svm
