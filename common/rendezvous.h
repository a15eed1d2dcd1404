// A file rendezvous: one process publishes a few bytes (an NCCL unique id) under a path in
// a folder every process sees (the run folder, shared on a cluster), the others wait for
// them. The file appears atomically (written under a temporary name, then renamed), so a
// reader never sees half of it.
#pragma once
#include <string>
#include <vector>

namespace cae {

// Writes `bytes` to `path` atomically. Throws std::runtime_error naming the file.
void publish_rendezvous(const std::string& path, const std::vector<unsigned char>& bytes);

// Waits until `path` exists and holds exactly `size` bytes, polling; throws
// std::runtime_error naming the file when `timeout_seconds` pass first or when the file
// has another size. The path must be unique per launch (a stale file is not detected).
std::vector<unsigned char> await_rendezvous(const std::string& path, size_t size, double timeout_seconds);

}  // namespace cae
