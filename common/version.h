// Version strings recorded in every output file's `created_by` attribute.
#pragma once
#include <string>

namespace cae {
const char* version();        // "0.1.0"
const char* git_describe();   // `git describe --always --dirty` at build time, or "unknown"
bool built_with_cuda();
std::string version_line(const std::string& tool);  // "ae-train 0.1.0 (git abc123, CUDA)"; without git: "ae-train 0.1.0 (CUDA)"
}  // namespace cae
