// Preemption of svm-fit (docs/RELIABILITY.md, "Preemption"). Its long work is a list of units:
// the cross-validation's (fold, gamma) cells and the probability folds. Each unit's results
// are a few bytes (a cell: its resolved gamma and every C's confusion matrix of the held-out
// images; a probability fold: its held-out rows' decision values) and depend on nothing but
// the unit, so a run that stops between units and keeps the finished ones' bytes can be
// continued by replaying them: the same table, sigmoids and model as a run that never stopped.
// A cell's confusion matrices give the numbers of every --cv-scoring but log_loss, so the
// scoring is not part of the fingerprint; log_loss cells add each C's log-loss and are
// marked so (UnitLog::computed_for "log_loss"): a resume under the other kind of scoring
// computes them again, as it does the probability folds of another pair. The probability folds are of the pair the grid chose, so they carry
// that pair (UnitLog::computed_for) and are recomputed when a resume chooses another.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/stop_signal.h"

namespace cae {
class GroupExchange;
}

namespace svm {

// The finished units of one cross-validation by unit number, and when to stop.
// cross_validate and fit_sigmoids replay the units they find here instead of computing them,
// add every unit they finish, read stop_requested before computing each unit (and once
// after the last) and, when it says stop, return early with `stopped` set: every rank of a
// group stops together, and on rank 0 `finished` then holds every rank's units.
struct UnitLog {
  std::map<int64_t, std::vector<unsigned char>> finished;
  std::function<bool()> stop_requested;
  bool stopped = false;
  // What the finished units were computed for when the run decides it on the way (the
  // probability folds: the chosen C and gamma); "" when the fingerprint alone fixes it.
  std::string computed_for;
  bool stop_now() const { return stop_requested && stop_requested(); }
  // The units are about to be computed for `what`: finished units computed for something
  // else are dropped (to be computed again). Returns how many were dropped.
  size_t compute_for(const std::string& what);
};

// Whether any rank of `group` stops, from each rank's `here` (every rank calls it, as a
// gather with `tag`): a group stops at the same unit boundary on every rank.
bool any_rank_stops(cae::GroupExchange& group, const std::string& tag, bool here);

// svm::train's two cross-validations.
struct TrainUnits {
  UnitLog cv, probability;
  bool stopped() const { return cv.stopped || probability.stopped; }
};

// The resume file of svm-fit's output `output`: `<output>.resume.h5`.
std::string resume_path(const std::string& output);

// Writes the finished units to `path` atomically, with `fingerprint` (what the results
// depend on: a resume with anything else is refused).
void save_resume(const std::string& path, const std::string& fingerprint, const TrainUnits& units);

// The finished units of `path` into `units` (its stop_requested kept); false when there is
// no such file. cae::UsageError naming the file when it was written with another
// fingerprint; a damaged file fails naming it.
bool load_resume(const std::string& path, const std::string& fingerprint, TrainUnits& units);

// What svm-fit's results depend on, for save_resume and load_resume: `settings` (the
// options that change them, as one string) and the features file's size and modification
// time (features rewritten in place are other features).
std::string fit_fingerprint(const std::string& features, const std::string& settings);

// svm-fit's preemption around svm::train. While it lives, SIGUSR1 and SIGTERM only ask the
// cross-validations to stop between units (when the plan has none — no --cv, no
// --probability — the signals keep their usual meaning and units() is nullptr).
// With `resume`, the finished units of resume_path(output) are loaded (cae::UsageError when
// its fingerprint differs); without, an existing resume file is ignored and later replaced.
// Every rank of a group loads it; rank 0 (`lead`) alone writes, removes and says.
class FitPreemption {
 public:
  FitPreemption(const std::string& output, const std::string& fingerprint, bool resume, bool lead, bool has_units);
  FitPreemption(const FitPreemption&) = delete;  // units() points into this object
  FitPreemption& operator=(const FitPreemption&) = delete;
  TrainUnits* units() { return signals_ ? &units_ : nullptr; }
  // After a train() that was interrupted: rank 0 writes the resume file and says on stderr
  // (even with --quiet) where it stopped — of `cv_cells` cells and `probability_folds`
  // folds — and how to go on. Then throws cae::Interrupted (exit 75) on every rank.
  [[noreturn]] void stop(int cv_cells, int probability_folds);
  // After the model is written: rank 0 removes the resume file.
  void finished();

 private:
  std::string path_, fingerprint_;
  bool lead_;
  std::optional<cae::StopSignals> signals_;
  TrainUnits units_;
};

}  // namespace svm
