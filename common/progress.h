// A progress bar for long work: drawn on stderr only when it is a terminal (and not
// --quiet), so logs stay clean. Shows done/total, rate, ETA and a caller-supplied note
// (e.g. the running loss).
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

 private:
  std::string label_, unit_;
  int64_t total_;
  bool active_;
  double last_draw_ = -1;
  Stopwatch clock_;
};

}  // namespace cae
