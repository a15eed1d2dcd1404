#include "common/cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <sstream>
#include <thread>

#include "common/atomic_output.h"
#include "common/blas_runtime.h"
#include "common/cublas_runtime.h"
#include "common/device.h"
#include "common/error.h"
#include "common/escape.h"
#include "common/json.h"
#include "common/log.h"
#include "common/memory_limit.h"
#include "common/version.h"
#include "common/view_set.h"

namespace cae {
namespace {
const CLI::App* g_app = nullptr;
std::set<const CLI::Option*> g_output_options;
// default_means(): what an option's stand-in default means; record_effective(): what it
// turned out to be in this run (by option name without dashes).
std::map<const CLI::Option*, std::string> g_default_meaning;
std::map<std::string, std::string> g_effective;
// --record-output-as: the name -o's file will have once the caller renames it (cli.h).
constexpr const char* kRecordOutputAs = "--record-output-as";
std::string g_record_output_as;

// ---- wording ------------------------------------------------------------------------

// "FLOAT:FLOAT in [0 - 1]" -> "FLOAT in [0, 1]", "INT:NONNEGATIVE" -> "INT >= 0",
// "TEXT:{adam,sgd}" -> "{adam,sgd}": CLI11 joins the type and each check's own label.
std::string friendly_type(const std::string& full) {
  if (full.empty()) return full;
  const size_t colon = full.find(':');
  std::string type = full.substr(0, colon);
  if (colon == std::string::npos) return type;
  std::string out = type;
  std::string rest = full.substr(colon + 1);
  static const std::regex range(R"(^(?:\w+ )?in \[(\S+) - (\S+)\]$)");
  std::smatch m;
  if (rest == "NONNEGATIVE")
    out += " >= 0";
  else if (rest == "POSITIVE")
    out += " > 0";
  else if (std::regex_match(rest, m, range))
    out += " in [" + m[1].str() + ", " + m[2].str() + "]";
  else if (!rest.empty() && rest[0] == '{')
    out = rest;
  else
    out += " (" + rest + ")";
  return out;
}

class Formatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (!opt->get_option_text().empty() || opt->get_type_size() == 0) return CLI::Formatter::make_option_opts(opt);
    std::string out;
    const std::string type = friendly_type(opt->get_type_name());
    if (!type.empty()) out += " " + type;
    const auto meaning = g_default_meaning.find(opt);
    if (meaning != g_default_meaning.end())
      out += " (default: " + meaning->second + ")";
    else if (!opt->get_default_str().empty())
      out += " (default " + opt->get_default_str() + ")";
    if (opt->get_required()) out += " REQUIRED";
    return out;
  }
};

// The option's long name ("--features"), also for hidden options (get_name() is empty for those).
std::string option_name(const CLI::Option* opt) {
  if (!opt->get_lnames().empty()) return "--" + opt->get_lnames()[0];
  if (!opt->get_snames().empty()) return "-" + opt->get_snames()[0];
  return opt->get_name();
}

const CLI::Option* find_option(const CLI::App& app, const std::string& name) {
  for (const CLI::Option* o : app.get_options())
    if (o->check_name(name)) return o;
  return nullptr;
}

bool is_integer(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  strtoll(s.c_str(), &end, 10);
  return *end == '\0' && errno == 0;
}
bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  strtod(s.c_str(), &end);
  return *end == '\0';
}

// A value given to `opt` that is not of its type, in words; "" when it is of its type.
std::string type_problem(const CLI::Option* opt, const std::string& name, const std::string& value) {
  const std::string type = opt ? opt->get_type_name() : "";
  if (type.rfind("INT", 0) == 0 && !is_integer(value))
    return name + ": '" + value + "' is not an integer";
  if (type.rfind("UINT", 0) == 0 && !is_integer(value))
    return name + ": '" + value + "' is not a whole number";
  if (type.rfind("FLOAT", 0) == 0 && !is_number(value))
    return name + ": '" + value + "' is not a number";
  return "";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ---- resources ----------------------------------------------------------------------

void check_cache_mb(const CLI::Option* opt) {
  if (!opt || opt->count() == 0 || opt->results().empty()) return;
  const std::string v = opt->results()[0];
  if (!is_integer(v)) return;  // CLI11 has refused it already
  const long long mb = strtoll(v.c_str(), nullptr, 10);
  const uint64_t have = usable_memory_bytes() >> 20;
  if (mb > 0 && uint64_t(mb) > have)
    throw UsageError("--cache-mb " + v + " is more than the " + std::to_string(have) +
                     " MB this process may use (physical memory, the cgroup's limit, ulimit -v / -d); give at most that");
}

}  // namespace

CLI::Option* output_file(CLI::Option* opt) {
  g_output_options.insert(opt);
  return opt;
}

int max_threads() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<unsigned>(1024, std::max<unsigned>(64, 4 * hw)));
}

void check_thread_count(const std::string& option, int64_t threads) {
  if (threads < 0) throw UsageError(option + " " + std::to_string(threads) + " is negative");
  if (threads > max_threads())
    throw UsageError(option + " " + std::to_string(threads) + " is more than " + std::to_string(max_threads()) +
                     " (4x the " + std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
                     " hardware threads of this machine, at least 64, at most 1024)");
}

uint64_t usable_memory_bytes() { return memory_limit_bytes(); }

std::string closest_option(const CLI::App& app, const std::string& misspelt) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) {
      const std::string name = "--" + n;
      // A prefix ("--epoch" of "--epochs") or up to 2 edits (3 for long names) away.
      size_t d = edit_distance(misspelt, name);
      if (name.rfind(misspelt, 0) == 0 && misspelt.size() >= 4) d = std::min<size_t>(d, 1);
      const size_t limit = name.size() > 10 ? 3 : 2;
      if (d <= limit && d < best_d) best = name, best_d = d;
    }
  }
  return best;
}

std::string explain_parse_error(const CLI::App& app, const std::string& msg) {
  std::smatch m;
  static const std::regex range(R"(^(\S+): Value (.*) not in range (\S+) to (\S+)$)");
  static const std::regex member(R"(^(\S+): (.*) not in \{(.*)\}$)");
  static const std::regex conversion(R"(^The value (.*) is not an allowed value for (\S+)$)");
  static const std::regex conversion2(R"(^Could not convert: (\S+) = (.*)$)");
  static const std::regex extras(R"(^The following arguments? (?:was|were) not expected: (.*)$)");
  static const std::regex missing_value(R"(^(\S+): \d+ required (\S+) missing$)");
  if (std::regex_match(msg, m, range)) {
    const std::string name = m[1], value = m[2];
    const CLI::Option* opt = find_option(app, name);
    std::string p = type_problem(opt, name, value);
    if (!p.empty()) return p;
    if (!std::isfinite(strtod(value.c_str(), nullptr))) return name + ": '" + value + "' is not a finite number";
    const std::string type = opt ? opt->get_type_name() : "";
    if (type.find("NONNEGATIVE") != std::string::npos) return name + ": " + value + " is negative; give a value >= 0";
    if (type.find("POSITIVE") != std::string::npos) return name + ": " + value + " is not > 0";
    return name + ": " + value + " is not in [" + CLI::detail::to_string(strtod(m[3].str().c_str(), nullptr)) + ", " +
           CLI::detail::to_string(strtod(m[4].str().c_str(), nullptr)) + "]";
  }
  if (std::regex_match(msg, m, member)) {
    std::string choices = m[3];
    std::replace(choices.begin(), choices.end(), ',', '|');
    return m[1].str() + ": '" + m[2].str() + "' is not one of " + choices;
  }
  if (std::regex_match(msg, m, conversion) || std::regex_match(msg, m, conversion2)) {
    const bool first = msg.rfind("The value", 0) == 0;
    const std::string name = first ? m[2].str() : m[1].str(), value = first ? m[1].str() : m[2].str();
    const std::string p = type_problem(find_option(app, name), name, value);
    return p.empty() ? name + ": '" + value + "' is not a valid value" : p;
  }
  if (std::regex_match(msg, m, missing_value)) return m[1].str() + " needs a value (" + friendly_type(m[2]) + ")";
  if (std::regex_match(msg, m, extras)) {
    // CLI11 lists the leftovers space-separated; name the first unknown option.
    std::istringstream words(m[1].str());
    std::string w, first_arg;
    while (words >> w) {
      if (w.size() > 1 && w[0] == '-') {
        const std::string key = w.substr(0, w.find('='));
        const std::string near = closest_option(app, key);
        return "unknown option " + key + (near.empty() ? "" : " (did you mean " + near + "?)");
      }
      if (first_arg.empty()) first_arg = w;
    }
    return "unexpected argument '" + first_arg + "' (every value follows its option, e.g. --data FILE)";
  }
  return msg;
}

CLI::Option* default_means(CLI::Option* opt, const std::string& meaning) {
  g_default_meaning[opt] = meaning;
  return opt;
}

CLI::Option* add_threads_option(CLI::App& app, int& threads, const std::string& help, const std::string& meaning) {
  return default_means(app.add_option("--threads", threads, help)->check(CLI::NonNegativeNumber), meaning);
}

CLI::Option* add_view_set_option(CLI::App& app, const std::string& name, std::string& value, const std::string& help) {
  const CLI::Validator view_set(
      [](std::string& spec) -> std::string {
        try {
          ViewSet::parse(spec);
          return "";
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
      },
      "none|flip|shift:K|flip,shift:K");
  return app.add_option(name, value, help)->check(view_set);
}

void record_effective(const std::string& option, const std::string& value) { g_effective[option] = value; }

std::string options_json() {
  JsonObject j;
  if (!g_app) return j.str();
  for (const CLI::Option* opt : g_app->get_options()) {
    if (option_name(opt) == kRecordOutputAs) continue;  // recorded as "output" instead
    std::string name = opt->get_name();
    if (name.empty() || name == "--help" || name == "--version" || name == "--quiet" || name == "--json") continue;
    while (!name.empty() && name[0] == '-') name.erase(0, 1);
    if (opt->get_expected_min() == 0) {  // a flag
      j.add(name, opt->count() > 0);
      continue;
    }
    std::string value;
    if (name == "output" && !g_record_output_as.empty()) {
      value = g_record_output_as;
    } else if (opt->count() > 0) {
      auto res = opt->results();
      for (size_t i = 0; i < res.size(); ++i) value += (i ? "," : "") + res[i];
    } else if (g_effective.count(name)) {
      value = g_effective[name];
    } else if (g_default_meaning.count(opt)) {
      value = g_default_meaning[opt];
    } else {
      value = opt->get_default_str();
    }
    j.add(name, value);
  }
  return j.str();
}

void emit_json(const CommonOptions& common, const std::string& json_line) {
  if (!common.json) return;
  fputs((json_line + "\n").c_str(), stdout);
  fflush(stdout);
}

namespace {

// The checks on files and resources every tool gets (cli.h), before any work.
void check_options(const CLI::App& app) {
  std::vector<FileArg> inputs, outputs;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_expected_min() == 0 || opt->count() == 0) continue;  // flags, options not given
    const std::string name = option_name(opt);
    if (name == kRecordOutputAs) continue;  // a name for the record, neither read nor written
    const bool is_output = name == "--output" || g_output_options.count(opt) > 0;
    for (const std::string& v : opt->results()) {
      // CLI11 reads "nan" and "inf" as numbers, and its range checks let NaN through (every
      // comparison with it is false): no floating option of a tool means anything by them.
      if (opt->get_type_name().rfind("FLOAT", 0) == 0 && is_number(v) && !std::isfinite(strtod(v.c_str(), nullptr)))
        throw UsageError(name + ": '" + v + "' is not a finite number");
      if (v.empty()) continue;
      if (is_output) {
        outputs.push_back({name == "--output" ? "-o" : name, v});
        continue;
      }
      struct stat st;
      if (stat(v.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) inputs.push_back({name, v});
    }
  }
  for (const FileArg& o : outputs) check_output_path(o.path);
  check_distinct(inputs, outputs);
  if (const CLI::Option* t = find_option(app, "--threads"); t && t->count() > 0 && is_integer(t->results()[0]))
    check_thread_count("--threads", strtoll(t->results()[0].c_str(), nullptr, 10));
  check_cache_mb(find_option(app, "--cache-mb"));
}

}  // namespace

namespace {
std::vector<std::string> g_command_line;
}

const std::vector<std::string>& tool_command_line() { return g_command_line; }

int run_tool(int argc, char** argv, const ToolInfo& info, CommonOptions& common,
             const std::function<void(CLI::App&)>& setup, const std::function<void()>& run) {
  g_command_line.assign(argv, argv + argc);
  prepare_compute_environment(argv);  // OpenBLAS's settings, in-process (blas_runtime.h)
  set_log_tool(info.name);
  install_cleanup_signal_handlers();
  g_output_options.clear();
  g_default_meaning.clear();
  g_effective.clear();
  CLI::App app{std::string(info.name) + " — " + info.purpose, info.name};
  app.formatter(std::make_shared<Formatter>());
  app.footer(std::string("Example:\n  ") + info.example +
             "\n\nExit status: 0 success, 1 runtime error, 2 usage error.");
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", version_line(info.name));
  g_record_output_as.clear();
  if (info.has_output) {
    output_file(app.add_option("-o,--output", common.output, "Output file (written atomically)")->required());
    // Plumbing for pipelines, so not in --help (README, "Conventions").
    app.add_option(kRecordOutputAs, g_record_output_as,
                   "Record NAME as the output in the file's provenance (-o is renamed to it when done)")
        ->group("");
  }
  app.add_flag("-q,--quiet", common.quiet, "Only errors and warnings on stderr");
  app.add_flag("--json", common.json, "Print a one-line JSON summary on stdout");
  if (info.has_device)
    app.add_option("--device", common.device, "Compute device")->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  try {
    setup(app);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports a missing required option before an unknown one, but the unknown one
    // ("--outptu" for "--output") is usually why the other is missing: name it first.
    std::string what = e.what();
    for (const std::string& left : app.remaining())
      if (left.size() > 1 && left[0] == '-') {
        what = "The following argument was not expected: " + left;
        break;
      }
    fprintf(stderr, "%s: usage error: %s (see --help)\n", info.name,
            escape_controls(explain_parse_error(app, what)).c_str());
    return 2;
  }
  set_quiet(common.quiet);
  g_app = &app;
  int status = 0;
  try {
    // Fail before hours of work, not after them, when an output cannot be written or
    // would overwrite an input.
    check_options(app);
    run();
  } catch (const UsageError& e) {
    fprintf(stderr, "%s: usage error: %s\n", info.name, escape_controls(e.what()).c_str());
    status = 2;
  } catch (const Interrupted& e) {
    if (*e.what()) fprintf(stderr, "%s: %s\n", info.name, escape_controls(e.what()).c_str());
    status = kExitInterrupted;
  } catch (const std::bad_alloc&) {
    fprintf(stderr, "%s: error: out of memory (%s)\n", info.name, info.memory_hint);
    status = 1;
  } catch (const OutOfDeviceMemory& e) {
    fprintf(stderr, "%s: error: %s (%s)\n", info.name, escape_controls(e.what()).c_str(), info.memory_hint);
    status = 1;
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: error: %s\n", info.name, escape_controls(e.what()).c_str());
    status = 1;
  }
  g_app = nullptr;  // app ends here
  cublas::settle();  // never exit while cuBLAS loads in the background (common/cublas_runtime.h)
  settle_gpu_context();  // nor while the CUDA context is being created (common/device.h)
  return status;
}

}  // namespace cae
