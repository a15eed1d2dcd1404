#include "common/memory_limit.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "common/error.h"

namespace cae {
namespace {

// The limit in one file: a whole number of bytes; "max", an unreadable file or v1's "no
// limit" (2^63 rounded down to a page, or more than 2^60: no machine has that) give 0.
uint64_t read_limit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.size() > 20) return 0;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return 0;
  const uint64_t v = std::stoull(text);
  return v >= (uint64_t(1) << 60) ? 0 : v;
}

void take(uint64_t& best, uint64_t v) {
  if (v > 0 && (best == 0 || v < best)) best = v;
}

// The limit files of `path` (a cgroup path, "/a/b") and each ancestor under `mount`.
void walk(uint64_t& best, const std::string& mount, std::string path, const char* file) {
  if (path.find("..") != std::string::npos) return;  // a path in /proc never has one; a fake might
  while (true) {
    take(best, read_limit(mount + path + (path.empty() || path.back() != '/' ? "/" : "") + file));
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
}

// A "Name:   123 kB" line of /proc/self/status, in bytes; 0 when absent.
uint64_t status_bytes(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = strlen(name);
  while (std::getline(in, line))
    if (line.compare(0, n, name) == 0 && line.size() > n && line[n] == ':')
      return std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
  return 0;
}

}  // namespace

uint64_t saturating_product(uint64_t a, uint64_t b) {
  return a != 0 && b > std::numeric_limits<uint64_t>::max() / a ? std::numeric_limits<uint64_t>::max() : a * b;
}

namespace {

// memory_headroom, and in `whole` the least of the same limits before what the process
// already holds is taken off the rlimits.
MemoryHeadroom least_limit(uint64_t& whole) {
  MemoryHeadroom h{std::numeric_limits<uint64_t>::max(), "this machine's memory"};
  whole = std::numeric_limits<uint64_t>::max();
  auto take_limit = [&h, &whole](uint64_t bytes, const char* limit, uint64_t in_use) {
    if (bytes < h.bytes) h = {bytes, limit};
    whole = std::min(whole, bytes + in_use);
  };
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0)
    take_limit(static_cast<uint64_t>(pages) * static_cast<uint64_t>(page), "this machine's memory", 0);
  if (const uint64_t cgroup = cgroup_memory_limit()) take_limit(cgroup, "the cgroup's memory limit", 0);
  // What an rlimit leaves: the limit less what the process already holds of that kind.
  const struct {
    int resource;
    const char* in_use;
    const char* limit;
  } rlimits[] = {{RLIMIT_AS, "VmSize", "what ulimit -v (RLIMIT_AS) leaves this process"},
                 {RLIMIT_DATA, "VmData", "what ulimit -d (RLIMIT_DATA) leaves this process"}};
  for (const auto& r : rlimits) {
    struct rlimit lim;
    if (getrlimit(r.resource, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) continue;
    const uint64_t used = std::min<uint64_t>(status_bytes(r.in_use), lim.rlim_cur);
    take_limit(lim.rlim_cur - used, r.limit, used);
  }
  return h;
}

}  // namespace

MemoryHeadroom memory_headroom() {
  uint64_t whole = 0;
  return least_limit(whole);
}

uint64_t memory_limit_bytes() {
  uint64_t whole = 0;
  least_limit(whole);
  return whole;
}

void require_memory(const std::string& file, const std::string& what, uint64_t bytes) {
  const MemoryHeadroom h = memory_headroom();
  if (bytes <= h.bytes / 2) return;
  const std::string need = bytes == std::numeric_limits<uint64_t>::max()
                               ? std::string("more than 2^64 bytes")
                               : std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)";
  fail_file(file, what + " need " + need + ", more than half of " + h.limit + " (" + std::to_string(h.bytes >> 20) +
                      " MiB)");
}

uint64_t cgroup_memory_limit(const std::string& cgroup_root, const std::string& proc_cgroup) {
  uint64_t best = 0;
  std::ifstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    // hierarchy-ID:controller-list:path
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      walk(best, cgroup_root, path, "memory.max");  // v2, unified
      continue;
    }
    std::stringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ','))
      if (c == "memory") walk(best, cgroup_root + "/memory", path, "memory.limit_in_bytes");
  }
  // A cgroup namespace (containers) mounts the process's own cgroup as the root.
  take(best, read_limit(cgroup_root + "/memory.max"));
  take(best, read_limit(cgroup_root + "/memory/memory.limit_in_bytes"));
  return best;
}

}  // namespace cae
