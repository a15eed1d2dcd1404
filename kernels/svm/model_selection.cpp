#include "kernels/svm/model_selection.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>

#include "common/error.h"
#include "common/group.h"
#include "common/log.h"
#include "common/shuffle.h"
#include "common/timer.h"
#include "kernels/svm/group_fit.h"
#include "kernels/svm/preprocess.h"
#include "kernels/svm/probability.h"
#include "kernels/svm/resumable_units.h"

namespace svm {

namespace {

std::vector<std::string> split_commas(const std::string& text, const char* option) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (items.back().empty())
      throw cae::UsageError(std::string(option) + " has an empty item in '" + text + "'");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

// --cv-scoring log_loss fits a probability model on each fold's training part, whose own
// folds need at least 2 images of every class (check_sigmoid_data): refused before any fit.
void check_log_loss_folds(const FoldSplit& split, const int32_t* y, const std::vector<int32_t>& classes, size_t k,
                          const std::string& data_name) {
  std::vector<int64_t> count(classes.size() * k, 0);  // [class, fold]
  for (int64_t i = 0; i < split.images(); ++i) {
    const size_t c = static_cast<size_t>(std::lower_bound(classes.begin(), classes.end(), y[i]) - classes.begin());
    ++count[c * k + static_cast<size_t>(split.fold_of_image(i))];
  }
  for (size_t c = 0; c < classes.size(); ++c) {
    int64_t total = 0;
    for (size_t f = 0; f < k; ++f) total += count[c * k + f];
    for (size_t f = 0; f < k; ++f)
      if (total - count[c * k + f] < 2)
        cae::fail_file(data_name, "class " + std::to_string(classes[c]) + " has " +
                                      std::to_string(total - count[c * k + f]) + " training image in cross-validation "
                                      "fold " + std::to_string(f + 1) + "; --cv-scoring log_loss fits probabilities "
                                      "on each fold's training part and needs at least 2 of every class there");
  }
}

}  // namespace

std::vector<int> stratified_folds(const int32_t* y, int64_t n, int k, uint64_t seed) {
  if (k < 2) throw std::invalid_argument("stratified_folds: k must be at least 2");
  std::map<int32_t, std::vector<int64_t>> members;  // ascending labels: the dealing order is fixed
  for (int64_t r = 0; r < n; ++r) members[y[r]].push_back(r);
  std::mt19937_64 rng(seed);
  std::vector<int> fold(static_cast<size_t>(n), -1);
  int next = 0;  // carries on across classes, so the folds' totals stay within one of each other
  for (auto& [label, rows] : members) {
    cae::fisher_yates_shuffle(rows, rng);
    for (int64_t r : rows) {
      fold[r] = next;
      next = (next + 1) % k;
    }
  }
  return fold;
}

std::vector<int> grouped_folds(const int32_t* y, int64_t n, int views, int k, uint64_t seed) {
  if (views < 1 || n % views != 0)
    throw std::invalid_argument("grouped_folds: " + std::to_string(n) + " rows are not " + std::to_string(views) +
                                " views of the same images");
  const int64_t images = n / views;
  for (int v = 1; v < views; ++v)
    for (int64_t i = 0; i < images; ++i)
      if (y[v * images + i] != y[i])
        throw std::invalid_argument("grouped_folds: view " + std::to_string(v) + " of image " + std::to_string(i) +
                                    " has another label than the image");
  std::vector<int> fold = stratified_folds(y, images, k, seed);
  fold.resize(static_cast<size_t>(n));
  for (int v = 1; v < views; ++v) std::copy_n(fold.begin(), images, fold.begin() + v * images);
  return fold;
}

FoldSplit::FoldSplit(const float* X, const int32_t* y, int64_t n, int dim, int views, int folds, uint64_t seed)
    : FoldSplit(X, nullptr, y, n, dim, views, folds, seed) {}

FoldSplit::FoldSplit(const float* X, const int64_t* x_rows, const int32_t* y, int64_t n, int dim, int views,
                     int folds, uint64_t seed)
    : X_(X), x_rows_(x_rows), y_(y), n_(n), dim_(dim), views_(views), fold_(grouped_folds(y, n, views, folds, seed)) {}

void FoldSplit::rows(int f, FoldRows& out) const {
  out.train_rows.clear();
  out.held_rows.clear();
  const int64_t images = n_ / views_;
  for (int64_t r = 0; r < n_; ++r) {
    if (fold_[r] != f)
      out.train_rows.push_back(r);
    else if (r < images)
      out.held_rows.push_back(r);
  }
  auto gather = [&](const std::vector<int64_t>& rows, std::vector<float>& X, std::vector<int32_t>& y) {
    X.resize(rows.size() * static_cast<size_t>(dim_));
    y.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t x_row = x_rows_ ? x_rows_[rows[i]] : rows[i];
      std::memcpy(X.data() + i * dim_, X_ + x_row * dim_, sizeof(float) * dim_);
      y[i] = y_[rows[i]];
    }
  };
  gather(out.train_rows, out.train_X, out.train_y);
  gather(out.held_rows, out.held_X, out.held_y);
}

void check_cv_folds(int k, const int32_t* y, int64_t n, const std::vector<std::string>& class_names) {
  if (k < 2) throw cae::UsageError("--cv must be at least 2 folds, not " + std::to_string(k));
  std::map<int32_t, int64_t> count;
  for (int64_t r = 0; r < n; ++r) ++count[y[r]];
  auto smallest = count.begin();
  for (auto it = count.begin(); it != count.end(); ++it)
    if (it->second < smallest->second) smallest = it;
  if (smallest != count.end() && smallest->second < k) {
    const int32_t label = smallest->first;
    const std::string name = label >= 0 && static_cast<size_t>(label) < class_names.size()
                                 ? " (" + class_names[label] + ")"
                                 : std::string();
    throw cae::UsageError("--cv " + std::to_string(k) + ": class " + std::to_string(label) + name + " has only " +
                          std::to_string(smallest->second) + " training rows; every fold needs one of each class, so " +
                          "--cv must be at most " + std::to_string(smallest->second));
  }
}

std::vector<double> parse_C_list(const std::string& text) {
  std::vector<double> out;
  for (const std::string& item : split_commas(text, "--C")) {
    char* end = nullptr;
    const double c = std::strtod(item.c_str(), &end);
    // An infinite C is a hard-margin SVM, which has no solution on overlapping classes.
    if (*end != '\0' || std::isspace(static_cast<unsigned char>(item[0])) || !(c > 0) || !std::isfinite(c))
      throw cae::UsageError("--C must be a finite number > 0 (or a comma-separated list of them), not '" + item + "'");
    if (std::find(out.begin(), out.end(), c) != out.end())
      throw cae::UsageError("--C lists " + item + " twice");
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> parse_gamma_list(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& item : split_commas(text, "--gamma")) {
    parse_gamma_spec(item);  // throws on a bad spec
    if (std::find(out.begin(), out.end(), item) != out.end())
      throw cae::UsageError("--gamma lists " + item + " twice");
    out.push_back(item);
  }
  return out;
}

Scoring cv_scoring_option(const std::string& name, int cv_folds) {
  Scoring scoring = Scoring::accuracy;
  try {
    scoring = parse_scoring(name);
  } catch (const std::invalid_argument& e) {
    throw cae::UsageError(std::string("--cv-scoring: ") + e.what());
  }
  if (scoring != Scoring::accuracy && cv_folds == 0)
    throw cae::UsageError("--cv-scoring " + name + " needs --cv K (it chooses among the cross-validated pairs)");
  return scoring;
}

ModelSelection cross_validate(const float* X, const int32_t* y, int64_t n, int dim, const ClassifierParams& params,
                              const std::vector<double>& C, const std::vector<std::string>& gamma, int folds,
                              uint64_t seed, cae::Device device, const CvProgress& progress, int views, UnitLog* log,
                              Scoring scoring) {
  if (C.empty() || gamma.empty()) throw std::invalid_argument("cross_validate: empty C or gamma list");
  cae::Stopwatch clock;
  const FoldSplit split(X, y, n, dim, views, folds, seed);
  const int64_t images = split.images();
  const size_t nc = C.size(), ng = gamma.size(), k = static_cast<size_t>(folds);
  ModelSelection s;
  s.folds = folds;
  s.seed = seed;
  s.C = C;
  s.gamma = gamma;
  s.gamma_resolved.assign(ng * k, 0.0);
  s.fold_accuracy.assign(nc * ng * k, 0.0);
  s.fold_score.assign(nc * ng * k, 0.0);
  s.scoring = scoring;
  s.image_fold.resize(static_cast<size_t>(images));
  for (int64_t i = 0; i < images; ++i) s.image_fold[static_cast<size_t>(i)] = split.fold_of_image(i);
  std::vector<int64_t> correct(nc * ng, 0);  // over all folds; compared as integers for the argmax
  // The confusion matrices' rows and columns: the images' classes in ascending order (every
  // fold's model predicts one of them).
  std::vector<int32_t> classes(y, y + images);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  const int K = static_cast<int>(classes.size());
  auto class_index = [&](int32_t label) {
    return static_cast<int32_t>(std::lower_bound(classes.begin(), classes.end(), label) - classes.begin());
  };
  const int total_fits = static_cast<int>(nc * ng * k);
  int fits = 0;
  const bool log_loss_scoring = scoring == Scoring::log_loss;
  if (log_loss_scoring) check_log_loss_folds(split, y, classes, k, params.data_name);
  // A log_loss cell's record adds the log-loss to the confusion matrices; cells of another
  // scoring's run lack it, and a log_loss run's cells are not what the others read: a resume
  // under the other kind computes them again.
  if (log) {
    const size_t dropped = log->compute_for(log_loss_scoring ? "log_loss" : "");
    if (dropped && (!params.group || params.group->lead()))
      cae::log_info("%zu cross-validation cells of the resume file were computed for another --cv-scoring (%s); "
                    "computing them again", dropped, log_loss_scoring ? "without log-loss" : "log_loss");
  }

  // On a group each rank takes a contiguous share of the (fold, gamma) cells, fold-major,
  // so it prepares few folds; the cells' records then go to every rank, which all sum them
  // in the same order as one process. A cell's record: its resolved gamma, then per C the
  // [K, K] confusion matrix of its held-out images (and, for log_loss, their log-loss).
  const int world = params.group ? params.group->world() : 1;
  ResumableUnits units(static_cast<int64_t>(k * ng), params.group, log);
  const int my_fits = static_cast<int>(units.share().count * static_cast<int64_t>(nc));
  auto report = [&] {
    for (size_t c = 0; c < nc; ++c)
      if (progress) progress(++fits, world > 1 ? my_fits : total_fits);
  };

  FoldRows fr;
  bool stopping = false;
  for (size_t f = 0; f < k && !stopping; ++f) {
    bool any = false;
    for (size_t g = 0; g < ng; ++g) {
      const int64_t cell = static_cast<int64_t>(f * ng + g);
      if (!units.mine(cell)) continue;
      if (units.replay(cell))
        report();
      else
        any = true;
    }
    if (!any) continue;
    split.rows(static_cast<int>(f), fr);
    const int64_t n_held = fr.n_held();
    // The fold's rows are scaled and masked once; every (gamma, C) pair solves on them.
    ClassifierParams fold_params = params;
    fold_params.data_name = params.data_name + " (cross-validation fold " + std::to_string(f + 1) + " of " +
                            std::to_string(k) + ")";
    const PreparedSet rows(fr.train_X.data(), fr.train_y.data(), fr.n_train(), dim, fold_params);
    const PreparedQueries held = rows.prepare_queries(fr.held_X.data(), n_held);
    std::vector<int32_t> held_class(static_cast<size_t>(n_held));
    for (int64_t i = 0; i < n_held; ++i) held_class[static_cast<size_t>(i)] = class_index(fr.held_y[i]);
    for (size_t g = 0; g < ng; ++g) {
      const int64_t cell = static_cast<int64_t>(f * ng + g);
      if (!units.mine(cell) || units.has(cell)) continue;
      if (units.stop_now()) {
        stopping = true;
        break;
      }
      ClassifierParams p = fold_params;
      p.gamma = gamma[g];
      p.log_summary = false;  // one line per fit would bury the table in the log
      p.group = nullptr;      // the cell is this rank's alone
      // Every C of this (fold, gamma) from one kernel matrix on the GPU.
      const std::vector<Classifier> fitted = rows.fit_each_C(p, C, device);
      // log_loss: each C's probability model on the fold's training part, as --probability
      // fits it on all rows (libsvm's internal folds, seeded like the grid's). fr.train_X is
      // scaled by now: the probability folds read the fold's rows from X by row number, as
      // they were before the scaling (docs/SVM.md: memory of the scorings).
      const std::vector<Sigmoids> sigmoids =
          log_loss_scoring ? fit_sigmoids_each_C(X, fr.train_rows.data(), fr.train_y.data(), fr.n_train(), dim, p, C,
                                                 kLibsvmProbabilityFolds, seed, device, views)
                           : std::vector<Sigmoids>{};
      cae::ByteWriter record;
      record.put<double>(fitted.front().resolved_gamma());
      for (size_t c = 0; c < nc; ++c) {
        const Classifier& clf = fitted[c];
        const std::vector<double> dec = clf.decision_values(held, device);
        std::vector<int32_t> pred = clf.vote(dec, n_held);
        for (int32_t& label : pred) label = class_index(label);
        record.put_vector(confusion_matrix(held_class.data(), pred.data(), n_held, K));
        if (log_loss_scoring) {  // every fold's model has every class, in `classes` order
          const std::vector<double> prob = probabilities_from_decisions(dec, n_held, K, sigmoids[c].A, sigmoids[c].B);
          record.put<double>(log_loss(prob.data(), held_class.data(), n_held, K));
        }
      }
      units.computed(cell, record.bytes());
      report();
    }
  }
  // Every rank needs the table (the refit's (C, gamma) is its best pair) and the decision
  // to stop, which is any rank's.
  if (!units.exchange("cv", ResumableUnits::Results::every_rank, "cross-validation results", "cell")) return s;
  const std::map<int64_t, std::vector<unsigned char>>& records = units.records();
  if (records.size() != k * ng) throw std::runtime_error("cross-validation: the results miss some cells");
  for (const auto& [cell, bytes] : records) {
    const size_t f = static_cast<size_t>(cell) / ng, g = static_cast<size_t>(cell) % ng;
    cae::ByteReader in(bytes, "the cross-validation results of fold " + std::to_string(f + 1) + ", gamma " + gamma[g]);
    s.gamma_resolved[g * k + f] = in.get<double>();
    for (size_t c = 0; c < nc; ++c) {
      const std::vector<int64_t> confusion = in.get_vector<int64_t>();
      if (confusion.size() != static_cast<size_t>(K) * K)
        in.fail("a confusion matrix of " + std::to_string(confusion.size()) + " counts, not " + std::to_string(K) +
                " x " + std::to_string(K));
      int64_t right = 0, held = 0;
      for (int t = 0; t < K; ++t)
        for (int p = 0; p < K; ++p) {
          const int64_t count = confusion[static_cast<size_t>(t) * K + p];
          if (count < 0) in.fail("a negative count in a confusion matrix");
          held += count;
          if (t == p) right += count;
        }
      correct[c * ng + g] += right;  // integers: any order gives the same sum
      const size_t at = (c * ng + g) * k + f;
      s.fold_accuracy[at] = held ? static_cast<double>(right) / static_cast<double>(held) : 0.0;
      if (log_loss_scoring) {
        const double loss = in.get<double>();
        if (!(loss >= 0 && loss <= kMaxLogLoss)) in.fail("a log-loss outside [0, -log(1e-15)]");
        s.fold_score[at] = -loss;
      } else {
        s.fold_score[at] = held ? score(scoring, confusion, K) : 0.0;
      }
    }
    if (!in.done()) in.fail("longer than its " + std::to_string(nc) + " C values");
  }
  s.cv_accuracy.resize(nc * ng);
  s.cv_score.resize(nc * ng);
  size_t best = 0;
  for (size_t i = 0; i < nc * ng; ++i) {
    s.cv_accuracy[i] = static_cast<double>(correct[i]) / static_cast<double>(images);
    if (scoring == Scoring::accuracy) {
      s.cv_score[i] = s.cv_accuracy[i];
      if (correct[i] > correct[best]) best = i;  // strict: ties keep the first in C-major order
    } else {
      double sum = 0;  // in fold order, on every rank and group size alike
      for (size_t f = 0; f < k; ++f) sum += s.fold_score[i * k + f];
      s.cv_score[i] = sum / static_cast<double>(k);
      if (s.cv_score[i] > s.cv_score[best]) best = i;
    }
  }
  s.best_C = static_cast<int>(best / ng);
  s.best_gamma = static_cast<int>(best % ng);
  s.seconds = clock.seconds();
  return s;
}

}  // namespace svm
