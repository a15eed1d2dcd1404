#include "common/provenance.h"

#include <ctime>

#include "common/json.h"
#include "common/log.h"
#include "common/phases.h"
#include "common/sha256.h"
#include "common/version.h"

namespace cae {

InputFile hash_input(const std::string& path) { return {path, sha256_file(path)}; }

std::vector<std::string> recorded_input_hashes(const Hdf5Reader& r) {
  std::vector<std::string> out;
  if (!r.has_attr("/", "inputs")) return out;
  // The list write_provenance writes, [{"name":"...","sha256":"<64 hex>"},...] (other JSON
  // writers may add spaces). A name is escaped JSON and cannot hold the key with its
  // unescaped quotes, so scanning for the key is exact.
  const std::string json = r.attr_string("/", "inputs"), key = "\"sha256\"";
  auto skip_space = [&](size_t i) {
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t' || json[i] == '\n' || json[i] == '\r')) ++i;
    return i;
  };
  for (size_t at = json.find(key); at != std::string::npos; at = json.find(key, at + 1)) {
    size_t i = skip_space(at + key.size());
    if (i >= json.size() || json[i] != ':') return {};
    i = skip_space(i + 1);
    if (i >= json.size() || json[i] != '"') return {};
    const size_t end = json.find('"', i + 1);
    if (end == std::string::npos) return {};
    out.push_back(json.substr(i + 1, end - i - 1));
  }
  return out;
}

// Under AddressSanitizer the hashing runs when get() asks for it, not on a thread of its own:
// GCC's ASan runtime does not hold its allocator's locks across fork(), and the HDF5
// metadata probe (common/hdf5_probe.h) forks while the hashing thread may be allocating, so
// the probe's child could wait forever on a lock whose holder does not exist in it (8 of
// 150 ASan svm-fit runs on fresh files timed out in the probe; none of 150 without ASan,
// whose glibc malloc resets its locks in the child).
#if defined(__SANITIZE_ADDRESS__)
constexpr std::launch kHashLaunch = std::launch::deferred;
#else
constexpr std::launch kHashLaunch = std::launch::async;
#endif

BackgroundHashes::BackgroundHashes(std::vector<std::string> paths)
    : paths_(std::move(paths)), digests_(std::async(kHashLaunch, [p = paths_, cancel = cancel_] {
        std::vector<std::string> d;
        for (const std::string& path : p) d.push_back(sha256_file(path, cancel.get()));
        return d;
      })) {}

// An async future's destructor waits for its thread: once told to stop, it stops within a
// MB. A deferred one (the sanitizer build) never runs.
BackgroundHashes::~BackgroundHashes() { cancel_->store(true, std::memory_order_relaxed); }

std::vector<InputFile> BackgroundHashes::get() {
  PhaseScope hashing(Phase::hash);
  const std::vector<std::string> d = digests_.get();  // rethrows the hashing thread's error
  std::vector<InputFile> out;
  for (size_t i = 0; i < paths_.size(); ++i) out.push_back({paths_[i], d[i]});
  return out;
}

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
