// The memory limit a control group puts on this process. Slurm (ConstrainRAMSpace), Docker,
// Kubernetes and systemd enforce memory through cgroups, not through RLIMIT_AS: a tool that
// sizes its buffers from physical RAM alone is killed by the OOM killer instead of fitting.
// memory_headroom takes the smallest of physical memory, the rlimits and this.
#pragma once
#include <cstdint>
#include <string>

namespace cae {

// The smallest memory limit set on this process's cgroup or any of its ancestors: cgroup v2
// memory.max and v1 memory.limit_in_bytes, under `cgroup_root` (the cgroupfs mount), for
// the cgroup paths listed in `proc_cgroup` (the /proc/self/cgroup format). Also the
// root's own files, which is where a container (cgroup namespace) sees its limit. 0 when
// no limit is set ("max", v1's page-rounded 2^63) or nothing can be read. The parameters
// exist for tests (a fake tree).
uint64_t cgroup_memory_limit(const std::string& cgroup_root = "/sys/fs/cgroup",
                             const std::string& proc_cgroup = "/proc/self/cgroup");

// What this process may still allocate and the limit that says so: the least of physical
// memory, the cgroup limit, and what RLIMIT_AS (`ulimit -v`, how SGE/PBS enforce memory)
// and RLIMIT_DATA (`ulimit -d`) leave beside the address space / data segment already in
// use (/proc/self/status VmSize, VmData). Under `ulimit -v` a process that already maps
// its libraries and thread stacks has less than the limit, and an allocation past it fails.
struct MemoryHeadroom {
  uint64_t bytes = 0;  // UINT64_MAX when nothing could be read
  std::string limit;   // which one, as a message names it: "this machine's memory", ...
};
MemoryHeadroom memory_headroom();
// The least of the limits memory_headroom weighs, whole: nothing that the process already
// holds is taken off the rlimits. For a budget whose caller subtracts what it holds itself
// (cli.h, usable_memory_bytes); UINT64_MAX when nothing could be read.
uint64_t memory_limit_bytes();

// A buffer sized from what a file declares may take at most half of memory_headroom (the
// tool needs the rest for its other copies): throws "<file>: <what> need <bytes> bytes
// (<MiB> MiB), more than half of <limit> (<MiB> MiB)" before anything is allocated. `what`
// names the field or line the size came from.
void require_memory(const std::string& file, const std::string& what, uint64_t bytes);

// `a * b` in bytes, UINT64_MAX where it does not fit: a size to hand to require_memory.
uint64_t saturating_product(uint64_t a, uint64_t b);

}  // namespace cae
