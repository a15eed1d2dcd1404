// Names from outside the toolkit (file and folder names, class names from an image tree,
// paths given by users) may hold newlines, terminal escape sequences, quotes or separators.
// Each output syntax has one function here that makes such a name safe for it; every
// message, log line and export of the C++ tools goes through one of them (JSON strings:
// json_escape in common/json.h). docs/RELIABILITY.md, class 4.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cae {

// For messages and logs (one line on a terminal): the name unchanged when every character
// is printable (UTF-8 included), else in double quotes with C escapes — \n \r \t \\ \" and
// \xNN for other control bytes (ESC, DEL, C1 controls) and for bytes that are not UTF-8. So
// "train/cat<newline>dog/bad.jpg" prints as "train/cat\ndog/bad.jpg", on one line.
std::string quoted_name(const std::string& name);

// A whole message line: the same escapes as quoted_name, without the quotes, applied only
// to unsafe characters. The last defence of a sink (log lines, error lines): nothing that
// reaches stderr through it can start a new line or drive the terminal.
std::string escape_controls(const std::string& line);

// True when quoted_name would change `name`.
bool needs_quoting(const std::string& name);

// Length of the valid UTF-8 sequence at s[i] (shortest form, no surrogate, at most
// U+10FFFF; 1 for ASCII), or 0 when the byte there starts none; its code point to
// *code_point when given. The one UTF-8 decoder of the names' rules (this file's and
// common/class_names.h's).
size_t utf8_sequence(const std::string& s, size_t i, uint32_t* code_point = nullptr);

}  // namespace cae
