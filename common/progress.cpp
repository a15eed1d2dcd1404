#include "common/progress.h"

#include <cstdio>

#include "common/log.h"

namespace cae {

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), active_(stderr_is_tty()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, const std::string& note) {
  if (!active_) return;
  double t = clock_.seconds();
  if (done < total_ && t - last_draw_ < 0.1) return;  // ~10 redraws per second
  last_draw_ = t;
  constexpr int kWidth = 28;
  double frac = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  int fill = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(fill), '#');
  bar += std::string(static_cast<size_t>(kWidth - fill), '.');
  double rate = t > 0 ? static_cast<double>(done) / t : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  fprintf(stderr, "\r\033[K%s [%s] %lld/%lld %.0f %s/s ETA %dm%02ds %s", label_.c_str(), bar.c_str(),
          static_cast<long long>(done), static_cast<long long>(total_), rate, unit_.c_str(),
          static_cast<int>(eta) / 60, static_cast<int>(eta) % 60, note.c_str());
  fflush(stderr);
}

void ProgressBar::finish() {
  if (!active_) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  active_ = false;
}

}  // namespace cae
