#include "common/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/log.h"

namespace cae {
namespace {

std::string duration(double s) {
  if (!(s >= 0) || s > 359999) return "--:--";
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) return strprintf("%dh%02dm", t / 3600, t / 60 % 60);
  return strprintf("%dm%02ds", t / 60, t % 60);
}

}  // namespace

int terminal_columns() {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = getenv("COLUMNS")) {
    const int n = atoi(c);
    if (n > 0) return n;
  }
  return 80;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), active_(stderr_is_tty()) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::set_run(int64_t run_done, int64_t run_total, double run_seconds) {
  run_done_ = run_done, run_total_ = run_total, run_seconds_ = run_seconds;
}

std::string ProgressBar::render(int64_t done, const std::string& note, double t, int columns) const {
  const double frac = total_ > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0) : 1.0;
  // A rate from the first fraction of a second is noise: shown from 0.5 s on.
  const double rate = t >= 0.5 ? static_cast<double>(done) / t : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : -1;
  std::string run;
  if (run_done_ >= 0 && run_total_ > 0) {
    const double run_t = run_seconds_ + t;
    const double run_rate = run_t >= 0.5 ? static_cast<double>(run_done_ + done) / run_t : 0;
    const double run_eta = run_rate > 0 ? static_cast<double>(run_total_ - run_done_ - done) / run_rate : -1;
    run = " (run " + duration(run_eta) + ")";
  }
  const std::string counts = strprintf(" %lld/%lld", static_cast<long long>(done), static_cast<long long>(total_));
  const std::string speed = rate > 0 ? strprintf(" %.0f %s/s", rate, unit_.c_str()) : "";
  std::string tail = counts + speed + " ETA " + duration(eta) + run + (note.empty() ? "" : " " + note);
  // On a narrow terminal the rate goes first, so the ETAs and the note stay.
  if (static_cast<int>(label_.size() + tail.size()) + 13 > columns - 1)
    tail = counts + " ETA " + duration(eta) + run + (note.empty() ? "" : " " + note);
  // The bar takes what the label and the numbers leave, between 10 and 30 columns; on a
  // terminal too narrow even for that, the line is cut rather than wrapped.
  const int room = columns - 1 - static_cast<int>(label_.size() + tail.size()) - 3;
  const int width = std::clamp(room, 10, 30);
  const int fill = static_cast<int>(frac * width);
  std::string line = label_ + " [" + std::string(static_cast<size_t>(fill), '#') +
                     std::string(static_cast<size_t>(width - fill), '.') + "]" + tail;
  if (static_cast<int>(line.size()) > columns - 1) line.resize(static_cast<size_t>(std::max(columns - 1, 0)));
  return line;
}

void ProgressBar::update(int64_t done, const std::string& note) {
  if (!active_) return;
  double t = clock_.seconds();
  if (done < total_ && t - last_draw_ < 0.1) return;  // ~10 redraws per second
  last_draw_ = t;
  const std::string line = render(done, note, t, terminal_columns());
  fprintf(stderr, "\r\033[K%s", line.c_str());
  fflush(stderr);
  set_bar_on_line(true);
}

void ProgressBar::finish() {
  if (!active_) return;
  fprintf(stderr, "\r\033[K");
  fflush(stderr);
  set_bar_on_line(false);
  active_ = false;
}

}  // namespace cae
