// JSON for --json summaries and the `params`/`inputs` attributes, written by nlohmann-json
// (Debian nlohmann-json3-dev). Every string in it may come from outside (file names, class
// names of an old file): strings are escaped as JSON requires (every control character
// included) and bytes that are not UTF-8 become U+FFFD, so the text is always valid JSON
// and writing it never throws. Numbers: the shortest form that reads back the same double
// (an integral one as an integer: 2, not 2.0); NaN and infinities (a metric of an empty
// class) are null.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cae {

// The JSON text of one string value, quotes included.
std::string json_escape(const std::string& s);
// The JSON text of one number (null for NaN and infinities).
std::string json_number(double v);

// One JSON object, its keys in the order added.
class JsonObject {
 public:
  JsonObject();
  JsonObject(const JsonObject& other);
  JsonObject& operator=(const JsonObject& other);
  ~JsonObject();

  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(const std::string& key, bool value);
  JsonObject& add(const std::string& key, const std::vector<double>& values);
  JsonObject& add(const std::string& key, const std::vector<int64_t>& values);
  JsonObject& add(const std::string& key, const std::vector<std::string>& values);
  JsonObject& add(const std::string& key, const std::vector<std::vector<int64_t>>& rows);
  JsonObject& add(const std::string& key, const JsonObject& value);
  JsonObject& add(const std::string& key, const std::vector<JsonObject>& values);
  // `json` is the text of a JSON value this toolkit wrote (phases_json(), options_json());
  // std::invalid_argument when it is not JSON.
  JsonObject& add_raw(const std::string& key, const std::string& json);
  std::string str() const;

 private:
  std::unique_ptr<nlohmann::ordered_json> value_;
};

}  // namespace cae
