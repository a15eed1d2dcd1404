#include "common/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cae {

std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  snprintf(buf, sizeof buf, "%.17g", v);
  // Prefer the shortest representation that round-trips.
  for (int prec = 6; prec < 17; ++prec) {
    char shortbuf[32];
    snprintf(shortbuf, sizeof shortbuf, "%.*g", prec, v);
    if (std::strtod(shortbuf, nullptr) == v) return shortbuf;
  }
  return buf;
}

void JsonObject::key(const std::string& k) {
  if (!body_.empty()) body_ += ',';
  body_ += json_escape(k) + ':';
}

JsonObject& JsonObject::add(const std::string& k, const std::string& value) {
  key(k);
  body_ += json_escape(value);
  return *this;
}
JsonObject& JsonObject::add(const std::string& k, double value) {
  key(k);
  body_ += json_number(value);
  return *this;
}
JsonObject& JsonObject::add(const std::string& k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}
JsonObject& JsonObject::add(const std::string& k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}
JsonObject& JsonObject::add(const std::string& k, const std::vector<double>& values) {
  key(k);
  body_ += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) body_ += ',';
    body_ += json_number(values[i]);
  }
  body_ += ']';
  return *this;
}
JsonObject& JsonObject::add_raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

}  // namespace cae
