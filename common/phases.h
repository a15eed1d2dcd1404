// Where a tool's wall time goes: start-up, reading, hashing, computing, writing. Tools put
// phases_json() into their --json summary as "phases"; make bench-pipeline sums them per
// stage (bench/bench-pipeline.sh, docs/BENCHMARKS.md).
//
// Time is charged to the innermost open phase of the calling thread's program, so a hash
// taken while writing counts as hashing, not writing; time outside every phase is "other".
// "startup" is measured from the process's start (/proc/self/stat) to the first phase.
// Only the main thread opens phases (the counters are not atomic).
#pragma once
#include <string>

namespace cae {

enum class Phase { startup, read, hash, compute, write, other };

class PhaseScope {
 public:
  explicit PhaseScope(Phase p);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase outer_;
};

// {"startup":s,"read":s,"hash":s,"compute":s,"write":s,"other":s,"total":s}, total = the
// process's age now.
std::string phases_json();
double phase_seconds(Phase p);

}  // namespace cae
