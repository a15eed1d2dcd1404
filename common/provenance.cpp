#include "common/provenance.h"

#include <ctime>

#include "common/json.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/version.h"

namespace cae {

InputFile hash_input(const std::string& path) { return {path, sha256_file(path)}; }

std::string utc_now_iso8601() {
  time_t t = time(nullptr);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_provenance(Hdf5Writer& w, const Provenance& p) {
  w.set_attr("/", "format", p.format);
  w.set_attr("/", "format_version", static_cast<int64_t>(p.format_version));
  w.set_attr("/", "created_by", version_line(log_tool()));
  w.set_attr("/", "created_at", utc_now_iso8601());
  std::string inputs = "[";
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    if (i) inputs += ",";
    inputs += JsonObject().add("name", p.inputs[i].name).add("sha256", p.inputs[i].sha256).str();
  }
  w.set_attr("/", "inputs", inputs + "]");
  w.set_attr("/", "params", p.params_json.empty() ? std::string("{}") : p.params_json);
}

}  // namespace cae
