// Error kinds every tool maps to its exit status: UsageError → 2, Interrupted → 75,
// anything else → 1.
#pragma once
#include <stdexcept>
#include <string>

#include "common/escape.h"

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

// The run stopped on SIGUSR1/SIGTERM after writing a resumable checkpoint (exit 75,
// EX_TEMPFAIL: "rerun with --resume"); what() is empty when the line was already printed.
inline constexpr int kExitInterrupted = 75;
struct Interrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A valid input in a form this toolkit does not read (a 12-bit JPEG, an unknown colour
// model): not damage. Tools report it like any runtime error; --skip-bad says "unsupported".
struct UnsupportedInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws std::runtime_error("<file>: <problem>"): the one-line message style of all tools.
// The name is quoted where it holds control characters (quoted_name): a newline or an escape
// sequence in a file name never splits the line or reaches the terminal raw.
[[noreturn]] inline void fail_file(const std::string& file, const std::string& problem) {
  throw std::runtime_error(quoted_name(file) + ": " + problem);
}

// Throws UnsupportedInput("<file>: unsupported <what>").
[[noreturn]] inline void fail_unsupported(const std::string& file, const std::string& what) {
  throw UnsupportedInput(quoted_name(file) + ": unsupported " + what);
}

}  // namespace cae
