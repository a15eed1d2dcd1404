// A tiny JSON object writer for --json summaries and the `params`/`inputs` attributes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cae {

std::string json_escape(const std::string& s);

class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, static_cast<int64_t>(value)); }
  JsonObject& add(const std::string& key, bool value);
  JsonObject& add(const std::string& key, const std::vector<double>& values);
  JsonObject& add_raw(const std::string& key, const std::string& json);  // value already JSON
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

std::string json_number(double v);  // finite → shortest round-trip form; NaN/Inf → null

}  // namespace cae
