// The option conventions every tool shares, registered in one place:
//   --help (purpose + worked example), --version, -o/--output, --quiet, --json,
//   --device auto|cpu|gpu (tools that compute).
// run_tool() maps outcomes to exit codes: 0 success, 2 usage error, 1 runtime error
// (one line "<tool>: error: <file>: <problem>" on stderr).
//
// Checks run_tool() makes on every tool's options after parsing, before any work
// (docs/RELIABILITY.md):
//   * files: every output (-o and the options marked with output_file()) is checked for
//     a writable folder and a name that fits, and must not be an input or another output
//     (check_distinct: device+inode, resolved path). Inputs are the values of all other
//     options that name an existing file, so a new input option needs no registration;
//   * resources: --threads is at most max_threads(); --cache-mb at most the memory the
//     process may use (physical memory, RLIMIT_AS, RLIMIT_DATA);
//   * provenance: --record-output-as NAME (any tool with -o; not shown by --help) makes
//     options_json() record NAME as the output, for a caller that writes under another
//     name and renames the file when done (the pipeline's training checkpoint);
//   * wording: CLI11's parse errors are rewritten in the toolkit's words
//     ("--epochs: 'abc' is not an integer", "unknown option --epoch (did you mean
//     --epochs?)"), and --help writes "FLOAT in [0, 1]", "INT >= 0".
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// A tool's whole main(): `add_options` registers the tool's options into its Options, then
// run_tool() parses and checks them and calls `run`:
//   int main(int argc, char** argv) { return cae::tool_main(argc, argv, kInfo, add_options, run); }
template <typename Options>
int tool_main(int argc, char** argv, const ToolInfo& info, void (*add_options)(CLI::App&, Options&),
              void (*run)(const Options&, const CommonOptions&)) {
  Options opt;
  CommonOptions common;
  return run_tool(argc, argv, info, common, [&](CLI::App& app) { add_options(app, opt); }, [&] { run(opt, common); });
}

// The command line run_tool() was given (argv[0] first), for a tool that starts copies of
// itself as the ranks of a group (launch_group).
const std::vector<std::string>& tool_command_line();

// Marks an option whose value is a file the tool writes (besides -o), e.g.
//   cae::output_file(app.add_option("--export-libsvm", opt.export_libsvm, "..."));
// so run_tool() checks it like -o and never counts it as an input. Returns `opt`.
CLI::Option* output_file(CLI::Option* opt);

// An option whose default is a stand-in for a rule (-1: "a tenth of the training images",
// 0: "all cores"): --help shows "(default: MEANING)" instead of the number, and
// options_json() records the effective value (record_effective) or else MEANING, never the
// stand-in. Returns `opt`:
//   cae::default_means(app.add_option("--threads", opt.threads, "CPU threads"), "all cores");
CLI::Option* default_means(CLI::Option* opt, const std::string& meaning);
// --threads N (N >= 0, checked), whose default 0 --help shows as `meaning`. Returns the option.
CLI::Option* add_threads_option(
    CLI::App& app, int& threads, const std::string& help = "CPU threads",
    const std::string& meaning = "OMP_NUM_THREADS, else all cores; with --ranks N, the cores / N each");
// An option NAME that takes a view set's spec (cae::ViewSet::parse, checked: "none", "flip",
// "shift:K", "flip,shift:K"), the views of each image an ae-encode --flip / --shifts file
// holds; `help` says how they are used. Returns the option.
CLI::Option* add_view_set_option(CLI::App& app, const std::string& name, std::string& value, const std::string& help);

// The value an option not given took (threads = 16), for options_json(); `option` is the
// long name without dashes ("threads"). Ignored when the option was given.
void record_effective(const std::string& option, const std::string& value);

// JSON object of every option's effective value (given or default), for the `params`
// provenance attribute. Valid inside `run`.
std::string options_json();

// Prints one JSON line on stdout when --json was given.
void emit_json(const CommonOptions& common, const std::string& json_line);

// The most threads an option may ask for: 4x the hardware threads, at least 64, at
// most 1024 (each thread costs buffers and a stack; more than this only oversubscribes).
int max_threads();
// Throws UsageError when `threads` (of `option`) is negative or above max_threads().
void check_thread_count(const std::string& option, int64_t threads);
// Bytes this process may use in all, what it already holds included: the least limit of
// memory_headroom() (common/memory_limit.h: memory_limit_bytes) — physical memory, the
// cgroup's limit, RLIMIT_AS or RLIMIT_DATA.
uint64_t usable_memory_bytes();

// For tests: the toolkit's wording of a CLI11 parse error of `app` (whose options give
// the types and the names to suggest), and the option closest to a misspelt one ("" when
// nothing is close).
std::string explain_parse_error(const CLI::App& app, const std::string& cli11_message);
std::string closest_option(const CLI::App& app, const std::string& misspelt);

}  // namespace cae
