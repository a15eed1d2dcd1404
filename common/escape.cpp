#include "common/escape.h"

#include <cstdint>
#include <cstdio>

namespace cae {
namespace {

// Length of the valid UTF-8 sequence at s[i] that encodes a printable character (not
// ASCII, not a C1 control U+0080..U+009F), or 0.
size_t printable_utf8(const std::string& s, size_t i) {
  uint32_t cp = 0;
  const size_t n = utf8_sequence(s, i, &cp);
  return n >= 2 && !(cp >= 0x80 && cp <= 0x9F) ? n : 0;
}

// Appends s with its unsafe characters escaped; returns whether any was. `quoting`: also
// \" and \\ (inside quotes).
bool append_escaped(const std::string& s, std::string& out, bool quoting = false) {
  bool changed = false;
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      if (quoting && (c == '"' || c == '\\')) out += '\\';
      out += char(c);
      ++i;
      continue;
    }
    if (c >= 0x80) {
      if (const size_t n = printable_utf8(s, i)) {
        out.append(s, i, n);
        i += n;
        continue;
      }
    }
    ++i;
    changed = true;
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        char buf[8];
        snprintf(buf, sizeof buf, "\\x%02X", c);
        out += buf;
      }
    }
  }
  return changed;
}

}  // namespace

size_t utf8_sequence(const std::string& s, size_t i, uint32_t* code_point) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) {
    if (code_point) *code_point = c;
    return 1;
  }
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (b(i + k) & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (code_point) *code_point = cp;
  return n;
}

bool needs_quoting(const std::string& name) {
  std::string scratch;
  return append_escaped(name, scratch);
}

std::string quoted_name(const std::string& name) {
  if (!needs_quoting(name)) return name;
  std::string out = "\"";
  append_escaped(name, out, true);
  return out + "\"";
}

std::string escape_controls(const std::string& line) {
  std::string out;
  out.reserve(line.size());
  append_escaped(line, out);
  return out;
}

}  // namespace cae
