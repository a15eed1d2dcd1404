// Provenance attributes carried by every file the toolkit writes (docs/FORMATS.md):
// format, format_version, created_by, created_at, inputs (name + sha256), params (JSON).
#pragma once
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/hdf5_io.h"

namespace cae {

struct InputFile {
  std::string name;    // as given on the command line
  std::string sha256;  // of the file's bytes (a folder input hashes its files in order)
};

struct Provenance {
  std::string format;       // e.g. "cifar10-dataset"
  int format_version = 1;
  std::string params_json;  // JSON object of the options used
  std::vector<InputFile> inputs;
};

InputFile hash_input(const std::string& path);
// The sha256 of each input recorded in a file's `inputs` attribute, in order; empty when
// the file has none or the attribute is not the toolkit's JSON list.
std::vector<std::string> recorded_input_hashes(const Hdf5Reader& r);
std::string utc_now_iso8601();

// The inputs' hashes, computed on a thread of their own from construction on, so that
// hashing a 2 GB features file overlaps the tool's reading and computing instead of adding
// to them (make bench-pipeline). get() waits for them (charged to the "hash" phase). Made
// before get(), the destructor stops the hashing at its next MB: a tool that fails, or
// turns out not to need them, exits without waiting for the rest.
class BackgroundHashes {
 public:
  explicit BackgroundHashes(std::vector<std::string> paths);
  ~BackgroundHashes();
  BackgroundHashes(const BackgroundHashes&) = delete;
  BackgroundHashes& operator=(const BackgroundHashes&) = delete;
  std::vector<InputFile> get();

 private:
  std::vector<std::string> paths_;
  std::shared_ptr<std::atomic<bool>> cancel_ = std::make_shared<std::atomic<bool>>(false);
  std::future<std::vector<std::string>> digests_;
};
// Writes the provenance attributes on "/" (created_by from the current tool's name).
void write_provenance(Hdf5Writer& w, const Provenance& p);

}  // namespace cae
