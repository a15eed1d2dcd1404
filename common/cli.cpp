#include "common/cli.h"

#include <cstdio>
#include <exception>

#include "common/atomic_output.h"
#include "common/blas_runtime.h"
#include "common/error.h"
#include "common/json.h"
#include "common/log.h"
#include "common/version.h"

namespace cae {
namespace {
const CLI::App* g_app = nullptr;
}

std::string options_json() {
  JsonObject j;
  if (!g_app) return j.str();
  for (const CLI::Option* opt : g_app->get_options()) {
    std::string name = opt->get_name();
    if (name.empty() || name == "--help" || name == "--version" || name == "--quiet" || name == "--json") continue;
    while (!name.empty() && name[0] == '-') name.erase(0, 1);
    if (opt->get_expected_min() == 0) {  // a flag
      j.add(name, opt->count() > 0);
      continue;
    }
    std::string value;
    if (opt->count() > 0) {
      auto res = opt->results();
      for (size_t i = 0; i < res.size(); ++i) value += (i ? "," : "") + res[i];
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

int run_tool(int argc, char** argv, const ToolInfo& info, CommonOptions& common,
             const std::function<void(CLI::App&)>& setup, const std::function<void()>& run) {
  prepare_compute_environment(argv);  // may re-execute the program once (blas_runtime.h)
  set_log_tool(info.name);
  install_cleanup_signal_handlers();
  CLI::App app{std::string(info.name) + " — " + info.purpose, info.name};
  app.footer(std::string("Example:\n  ") + info.example +
             "\n\nExit status: 0 success, 1 runtime error, 2 usage error.");
  app.option_defaults()->always_capture_default();
  app.set_version_flag("--version", version_line(info.name));
  if (info.has_output) app.add_option("-o,--output", common.output, "Output file (written atomically)")->required();
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
    fprintf(stderr, "%s: usage error: %s (see --help)\n", info.name, e.what());
    return 2;
  }
  set_quiet(common.quiet);
  g_app = &app;
  int status = 0;
  try {
    // Fail before hours of work, not after them, when the output cannot be written.
    if (info.has_output) check_output_path(common.output);
    run();
  } catch (const UsageError& e) {
    fprintf(stderr, "%s: usage error: %s\n", info.name, e.what());
    status = 2;
  } catch (const std::bad_alloc&) {
    fprintf(stderr, "%s: error: out of memory (%s)\n", info.name, info.memory_hint);
    status = 1;
  } catch (const OutOfDeviceMemory& e) {
    fprintf(stderr, "%s: error: %s (%s)\n", info.name, e.what(), info.memory_hint);
    status = 1;
  } catch (const std::exception& e) {
    fprintf(stderr, "%s: error: %s\n", info.name, e.what());
    status = 1;
  }
  g_app = nullptr;  // app ends here
  return status;
}

}  // namespace cae
