#include "common/json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>

namespace cae {
namespace {

// Compact, ASCII where the input is, and `replace`: a byte that is not UTF-8 becomes U+FFFD
// where the default handler would throw type_error.316.
std::string dump(const nlohmann::ordered_json& v) { return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// A double as its shortest form that reads back the same: an integral value as an integer
// ("2", as JSON readers and the tools' earlier lines have it, not nlohmann's "2.0"); NaN and
// infinities as null.
nlohmann::ordered_json number(double v) {
  if (!std::isfinite(v)) return nullptr;
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (v == std::trunc(v) && std::fabs(v) < kExactIntegers && !(v == 0 && std::signbit(v)))
    return static_cast<int64_t>(v);
  return v;
}

nlohmann::ordered_json numbers(const std::vector<double>& values) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (double v : values) array.push_back(number(v));
  return array;
}

}  // namespace

std::string json_escape(const std::string& s) { return dump(nlohmann::ordered_json(s)); }

std::string json_number(double v) { return dump(number(v)); }

JsonObject::JsonObject() : value_(std::make_unique<nlohmann::ordered_json>(nlohmann::ordered_json::object())) {}
JsonObject::JsonObject(const JsonObject& other) : value_(std::make_unique<nlohmann::ordered_json>(*other.value_)) {}
JsonObject& JsonObject::operator=(const JsonObject& other) {
  *value_ = *other.value_;
  return *this;
}
JsonObject::~JsonObject() = default;

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
  (*value_)[key] = value;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, double value) {
  (*value_)[key] = number(value);
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, int64_t value) {
  (*value_)[key] = value;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, bool value) {
  (*value_)[key] = value;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const std::vector<double>& values) {
  (*value_)[key] = numbers(values);
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const std::vector<int64_t>& values) {
  (*value_)[key] = values;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const std::vector<std::string>& values) {
  (*value_)[key] = values;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const std::vector<std::vector<int64_t>>& rows) {
  (*value_)[key] = rows;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const JsonObject& value) {
  (*value_)[key] = *value.value_;
  return *this;
}
JsonObject& JsonObject::add(const std::string& key, const std::vector<JsonObject>& values) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const JsonObject& v : values) array.push_back(*v.value_);
  (*value_)[key] = std::move(array);
  return *this;
}
JsonObject& JsonObject::add_raw(const std::string& key, const std::string& json) {
  nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw std::invalid_argument("JsonObject::add_raw: not JSON: " + json.substr(0, 80));
  (*value_)[key] = std::move(parsed);
  return *this;
}

std::string JsonObject::str() const { return dump(*value_); }

}  // namespace cae
