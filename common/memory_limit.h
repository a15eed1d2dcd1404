// The memory limit a control group puts on this process. Slurm (ConstrainRAMSpace), Docker,
// Kubernetes and systemd enforce memory through cgroups, not through RLIMIT_AS: a tool that
// sizes its buffers from physical RAM alone is killed by the OOM killer instead of fitting.
// Callers take the smallest of physical memory, the rlimits and this.
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

}  // namespace cae
