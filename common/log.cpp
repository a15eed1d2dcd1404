#include "common/log.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <vector>

#include "common/escape.h"

namespace cae {
namespace {
bool g_quiet = false;
std::string g_tool = "cifar-ae";
bool g_bar_on_line = false;

void vlog(const char* level, const char* fmt, va_list ap) {
  // A bar drawn with \r has no newline: clear it, or this line would be glued to it (the
  // bar redraws itself on its next update).
  std::string msg = g_bar_on_line ? "\r\033[K" : "";
  g_bar_on_line = false;
  msg += g_tool + ": " + level;
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  // Names inside the line (files, classes) may hold newlines or escape sequences.
  msg += escape_controls(buf);
  msg += '\n';
  fputs(msg.c_str(), stderr);
  fflush(stderr);
}
}  // namespace

void set_quiet(bool quiet) { g_quiet = quiet; }
void set_bar_on_line(bool on) { g_bar_on_line = on; }
bool is_quiet() { return g_quiet; }
bool stderr_is_tty() { return !g_quiet && isatty(STDERR_FILENO); }
void set_log_tool(const std::string& tool) { g_tool = tool; }
const std::string& log_tool() { return g_tool; }

void log_info(const char* fmt, ...) {
  if (g_quiet) return;
  va_list ap;
  va_start(ap, fmt);
  vlog("", fmt, ap);
  va_end(ap);
}

void log_warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog("warning: ", fmt, ap);
  va_end(ap);
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::vector<char> buf(static_cast<size_t>(n) + 1);
  vsnprintf(buf.data(), buf.size(), fmt, ap2);
  va_end(ap2);
  return std::string(buf.data(), static_cast<size_t>(n));
}

}  // namespace cae
