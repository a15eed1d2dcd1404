#include "common/memory_limit.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <vector>

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

}  // namespace

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
