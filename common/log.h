// Logging to stderr. Logs are for people; machine-readable summaries go to stdout (--json).
#pragma once
#include <string>

namespace cae {

void set_quiet(bool quiet);
bool is_quiet();
// True when stderr is a terminal and not quiet: progress bars draw only then.
bool stderr_is_tty();

// A progress bar is drawn on the current line: the next log line clears it first.
void set_bar_on_line(bool on);

// printf-style, one line, prefixed with the tool name set by set_log_tool().
void set_log_tool(const std::string& tool);
const std::string& log_tool();
void log_info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // shown even when quiet

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace cae
