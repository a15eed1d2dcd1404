#include "common/class_names.h"

#include <cstdint>
#include <map>

#include "common/error.h"
#include "common/escape.h"

namespace cae {
namespace {

// Length of the valid UTF-8 sequence at s[i] (shortest form, no surrogate, at most
// U+10FFFF), or 0 when the byte there starts none.
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
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
  return n;
}

std::string class_label(size_t c, const std::string& name) {
  return "class " + std::to_string(c) + " (" + quoted_name("'" + name + "'") + ")";
}

}  // namespace

std::string utf8_or_latin1(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    if (const size_t n = utf8_sequence(bytes, i)) {
      out.append(bytes, i, n);
      i += n;
      continue;
    }
    const uint8_t c = static_cast<uint8_t>(bytes[i++]);  // >= 0x80: ASCII is always valid
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

std::vector<std::string> checked_class_names(const std::vector<std::string>& names, const std::string& file) {
  std::vector<std::string> out;
  out.reserve(names.size());
  std::map<std::string, size_t> seen;  // held name -> its class
  for (size_t c = 0; c < names.size(); ++c) {
    const std::string& raw = names[c];
    if (raw.empty()) fail_file(file, "class " + std::to_string(c) + " has an empty name");
    if (raw.find('\0') != std::string::npos)
      fail_file(file, class_label(c, raw) + ": a class name may not hold a NUL byte");
    std::string name = utf8_or_latin1(raw);
    if (name.size() > kMaxClassNameBytes)
      fail_file(file, class_label(c, raw.substr(0, 32) + "...") + ": a class name is at most " +
                          std::to_string(kMaxClassNameBytes) + " bytes of UTF-8, this one " +
                          std::to_string(name.size()));
    const auto [at, fresh] = seen.emplace(name, c);
    if (!fresh) {
      const std::string& first = names[at->second];
      const std::string same = first == raw ? "" : ", the same name once bytes that are not UTF-8 are read as Latin-1";
      fail_file(file, class_label(at->second, first) + " and " + class_label(c, raw) + " are one class name" + same +
                          " (class names must be distinct)");
    }
    out.push_back(std::move(name));
  }
  return out;
}

}  // namespace cae
