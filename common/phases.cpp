#include "common/phases.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/json.h"

namespace cae {
namespace {

constexpr int kPhases = 6;
const char* const kNames[kPhases] = {"startup", "read", "hash", "compute", "write", "other"};

// Seconds since boot, the clock /proc/<pid>/stat's starttime counts in.
double boot_clock() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The process's start in boot_clock() seconds (field 22 of /proc/self/stat), or now when
// unreadable (then start-up reads as zero).
double process_start() {
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return boot_clock();
  char buf[1024] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may contain spaces
  unsigned long long start = 0;
  if (!p || std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                        &start) != 1)
    return boot_clock();
  return double(start) / double(sysconf(_SC_CLK_TCK));
}

struct Clock {
  double start = process_start();
  double last = start;       // when the current phase began
  Phase current = Phase::startup;
  double spent[kPhases] = {};
  // Charges the time since `last` to the current phase and makes `next` current.
  void switch_to(Phase next) {
    const double now = boot_clock();
    spent[int(current)] += now - last;
    last = now;
    current = next;
  }
};

Clock& clock_state() {
  static Clock c;
  return c;
}

}  // namespace

PhaseScope::PhaseScope(Phase p) : outer_(clock_state().current) { clock_state().switch_to(p); }
PhaseScope::~PhaseScope() {
  // Leaving the outermost phase goes to "other", not back to start-up.
  clock_state().switch_to(outer_ == Phase::startup ? Phase::other : outer_);
}

double phase_seconds(Phase p) {
  Clock& c = clock_state();
  c.switch_to(c.current);
  return c.spent[int(p)];
}

std::string phases_json() {
  Clock& c = clock_state();
  c.switch_to(c.current);
  JsonObject o;
  for (int i = 0; i < kPhases; ++i) o.add(kNames[i], c.spent[i]);
  o.add("total", c.last - c.start);
  return o.str();
}

}  // namespace cae
