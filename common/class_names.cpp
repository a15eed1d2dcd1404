#include "common/class_names.h"

#include <cstdint>
#include <map>

#include "common/error.h"
#include "common/escape.h"

namespace cae {
namespace {

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
