// A progress bar for long work: drawn on stderr only when it is a terminal (and not
// --quiet), so logs stay clean. Shows done/total, rate, ETA and a caller-supplied note
// (e.g. the running loss); sized to the terminal (TIOCGWINSZ, else $COLUMNS, else 80
// columns) and never wider, so it does not wrap on every redraw. A log line printed while
// a bar is drawn first clears it (log.cpp), so no message is glued to a bar.
#pragma once
#include <cstdint>
#include <string>

#include "common/timer.h"

namespace cae {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::string unit);
  ~ProgressBar();  // clears the line
  void update(int64_t done, const std::string& note = "");
  void finish();
  bool active() const { return active_; }

  // This bar is one part of a longer run (an epoch of a training): `run_done` units of
  // `run_total` were done before it, in `run_seconds`. The bar then also shows the whole
  // run's ETA, from the run's rate so far.
  void set_run(int64_t run_done, int64_t run_total, double run_seconds);

  // The line update() draws, at most `columns` wide (for tests: no terminal needed).
  std::string render(int64_t done, const std::string& note, double seconds, int columns) const;

 private:
  std::string label_, unit_;
  int64_t total_;
  bool active_;
  double last_draw_ = -1;
  int64_t run_done_ = -1, run_total_ = 0;
  double run_seconds_ = 0;
  Stopwatch clock_;
};

// Columns of the terminal on stderr (TIOCGWINSZ, else $COLUMNS, else 80).
int terminal_columns();

}  // namespace cae
