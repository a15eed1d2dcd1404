#include "kernels/svm/resume.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/atomic_output.h"
#include "common/error.h"
#include "common/group.h"
#include "common/hdf5_io.h"
#include "common/log.h"

namespace svm {

namespace {

constexpr const char* kFormat = "svm-fit-resume";
// 2: a cell's record holds confusion matrices (1 held right counts and accuracies).
constexpr int kFormatVersion = 2;

// A log as three datasets under `group`: the unit numbers, where each unit's bytes end, and
// the bytes one after the other. An empty log writes none of them.
void write_log(cae::Hdf5Writer& w, const std::string& group, const UnitLog& log) {
  if (log.finished.empty()) return;
  if (!log.computed_for.empty()) w.set_attr("/", group.substr(1) + "_computed_for", log.computed_for);
  std::vector<int64_t> units, ends;
  std::vector<uint8_t> bytes;
  for (const auto& [unit, b] : log.finished) {
    units.push_back(unit);
    bytes.insert(bytes.end(), b.begin(), b.end());
    ends.push_back(static_cast<int64_t>(bytes.size()));
  }
  w.write(group + "/units", units);
  w.write(group + "/ends", ends);
  if (!bytes.empty()) w.write(group + "/bytes", bytes);
}

void read_log(const cae::Hdf5Reader& h5, const std::string& group, UnitLog& log) {
  log.finished.clear();
  log.computed_for.clear();
  if (!h5.has(group + "/units")) return;
  const std::string computed_for = group.substr(1) + "_computed_for";
  if (h5.has_attr("/", computed_for)) log.computed_for = h5.attr_string("/", computed_for);
  const std::vector<int64_t> units = h5.read<int64_t>(group + "/units");
  const std::vector<int64_t> ends = h5.read<int64_t>(group + "/ends", {units.size()});
  const std::vector<uint8_t> bytes =
      h5.has(group + "/bytes") ? h5.read<uint8_t>(group + "/bytes") : std::vector<uint8_t>{};
  int64_t start = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    if (ends[i] < start || ends[i] > static_cast<int64_t>(bytes.size()) || log.finished.count(units[i]) != 0)
      cae::fail_file(h5.path(), group + ": the units' byte ranges are damaged");
    log.finished[units[i]].assign(bytes.begin() + start, bytes.begin() + ends[i]);
    start = ends[i];
  }
}

}  // namespace

size_t UnitLog::compute_for(const std::string& what) {
  size_t dropped = 0;
  if (computed_for != what) {
    dropped = finished.size();
    finished.clear();
  }
  computed_for = what;
  return dropped;
}

bool any_rank_stops(cae::GroupExchange& group, const std::string& tag, bool here) {
  cae::ByteWriter mine;
  mine.put<uint8_t>(here);
  for (const auto& rank : group.gather(tag, mine.bytes(), true))
    if (cae::ByteReader(rank, "a rank's stop request").get<uint8_t>() != 0) return true;
  return false;
}

std::string resume_path(const std::string& output) { return output + ".resume.h5"; }

void save_resume(const std::string& path, const std::string& fingerprint, const TrainUnits& units) {
  cae::AtomicOutput out(path);
  cae::Hdf5Writer w(out.temp_path(), path);
  w.set_attr("/", "format", kFormat);
  w.set_attr("/", "format_version", kFormatVersion);
  w.set_attr("/", "fingerprint", fingerprint);
  write_log(w, "/cv", units.cv);
  write_log(w, "/probability", units.probability);
  w.close();
  out.commit();
}

bool load_resume(const std::string& path, const std::string& fingerprint, TrainUnits& units) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  try {
    const cae::Hdf5Reader h5(path);
    h5.require_format(kFormat, "svm-fit", kFormatVersion);
    if (h5.attr_int("/", "format_version") < kFormatVersion)
      throw cae::UsageError(path + " was written by an older svm-fit, whose cells this one cannot replay; rerun without "
                                   "--resume to start again (it is then replaced)");
    if (h5.attr_string("/", "fingerprint") != fingerprint)
      throw cae::UsageError(path + " was written by svm-fit with other options or features; rerun without --resume "
                                   "to start again (it is then replaced), or with the options that wrote it");
    read_log(h5, "/cv", units.cv);
    read_log(h5, "/probability", units.probability);
  } catch (const cae::UsageError&) {
    throw;
  } catch (const std::exception& e) {
    // The reader's own line names the file first; the remedy follows it.
    throw std::runtime_error(std::string(e.what()) + "; the resume file is damaged: delete it, or rerun without "
                             "--resume to start from the beginning (it is then replaced)");
  }
  return true;
}

std::string fit_fingerprint(const std::string& features, const std::string& settings) {
  struct stat st {};
  if (stat(features.c_str(), &st) != 0) cae::fail_file(features, std::strerror(errno));
  return settings + "; features " + features + ", " + std::to_string(static_cast<long long>(st.st_size)) +
         " bytes, modified " + std::to_string(static_cast<long long>(st.st_mtim.tv_sec)) + "." +
         std::to_string(static_cast<long long>(st.st_mtim.tv_nsec));
}

FitPreemption::FitPreemption(const std::string& output, const std::string& fingerprint, bool resume, bool lead,
                             bool has_units)
    : path_(resume_path(output)), fingerprint_(fingerprint), lead_(lead) {
  if (!has_units) return;
  signals_.emplace();
  units_.cv.stop_requested = units_.probability.stop_requested = [this] { return signals_->requested(); };
  if (!resume) {
    struct stat st {};
    if (lead_ && stat(path_.c_str(), &st) == 0)
      cae::log_warn("%s is left by an interrupted run: starting from the beginning (--resume continues it); it is "
                    "replaced", path_.c_str());
    return;
  }
  if (!load_resume(path_, fingerprint_, units_)) {
    if (lead_) cae::log_info("no resume file %s yet: starting from the beginning", path_.c_str());
    return;
  }
  if (lead_)
    cae::log_info("resuming from %s: %zu cross-validation cells and %zu probability folds done", path_.c_str(),
                  units_.cv.finished.size(), units_.probability.finished.size());
}

void FitPreemption::stop(int cv_cells, int probability_folds) {
  if (lead_) {
    save_resume(path_, fingerprint_, units_);
    const int sig = signals_->signal();
    const std::string by = sig == SIGUSR1 ? "SIGUSR1" : sig == SIGTERM ? "SIGTERM" : "another rank's stop request";
    const std::string where =
        units_.cv.stopped ? "the cross-validation (" + std::to_string(units_.cv.finished.size()) + " of " +
                                std::to_string(cv_cells) + " (fold, gamma) cells done)"
                          : "the probability folds (" + std::to_string(units_.probability.finished.size()) + " of " +
                                std::to_string(probability_folds) + " done)";
    // Printed even with --quiet: the exit status alone does not say where the resume file is.
    fprintf(stderr, "svm-fit: interrupted by %s in %s; resume file %s; rerun the same command with --resume to "
            "continue\n", by.c_str(), where.c_str(), path_.c_str());
  }
  throw cae::Interrupted("");
}

void FitPreemption::finished() {
  if (lead_ && unlink(path_.c_str()) != 0 && errno != ENOENT)
    cae::log_warn("could not remove %s: %s", path_.c_str(), std::strerror(errno));
}

}  // namespace svm
