// Error kinds every tool maps to its exit status: UsageError → 2, anything else → 1.
#pragma once
#include <stdexcept>
#include <string>

namespace cae {

// A bad option value or combination (exit 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An allocation on the compute device (GPU) that failed; what() says how much was asked and
// how much was free. run_tool prints it with the tool's ToolInfo::memory_hint (exit 1).
struct OutOfDeviceMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws std::runtime_error("<file>: <problem>"): the one-line message style of all tools.
[[noreturn]] inline void fail_file(const std::string& file, const std::string& problem) {
  throw std::runtime_error(file + ": " + problem);
}

}  // namespace cae
