// The option conventions every tool shares, registered in one place:
//   --help (purpose + worked example), --version, -o/--output, --quiet, --json,
//   --device auto|cpu|gpu (tools that compute).
// run_tool() maps outcomes to exit codes: 0 success, 2 usage error, 1 runtime error
// (one line "<tool>: error: <file>: <problem>" on stderr).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace cae {

struct ToolInfo {
  const char* name;
  const char* purpose;        // one line
  const char* example;        // a worked example shown under --help
  bool has_device = false;    // registers --device
  bool has_output = true;     // registers -o/--output (required)
  // What to change when memory runs out (host or GPU), printed after "out of memory".
  const char* memory_hint = "try a smaller batch or --train-limit";
};

struct CommonOptions {
  std::string output;
  bool quiet = false;
  bool json = false;
  std::string device = "auto";
};

int run_tool(int argc, char** argv, const ToolInfo& info, CommonOptions& common,
             const std::function<void(CLI::App&)>& setup, const std::function<void()>& run);

// JSON object of every option's effective value (given or default), for the `params`
// provenance attribute. Valid inside `run`.
std::string options_json();

// Prints one JSON line on stdout when --json was given.
void emit_json(const CommonOptions& common, const std::string& json_line);

}  // namespace cae
