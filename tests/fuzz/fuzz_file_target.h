// Shared body of the file-reading libFuzzer targets: the input is written to a file in
// /dev/shm (the readers take paths, as the tools do) and handed to one reader. A reader
// may refuse the file with std::runtime_error; anything else (a crash, a sanitizer report,
// another exception type) is a finding. FUZZ_NO_PROBE=1 switches off the HDF5 metadata
// probe (common/hdf5_io.h) to fuzz the library in-process.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "common/hdf5_io.h"

namespace fuzz {

inline const std::string& input_path(const char* suffix) {
  static const std::string path = [&] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(dir) + "/cifarae-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  return path;
}

template <typename Reader>
int run_file_target(const uint8_t* data, size_t size, const char* suffix, Reader reader) {
  static const bool probe = [] {
    const char* v = getenv("FUZZ_NO_PROBE");
    return !(v && v[0] == '1');
  }();
  cae::set_hdf5_metadata_probe(probe);
  const std::string& path = input_path(suffix);
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  try {
    reader(path);
  } catch (const std::runtime_error&) {
  }
  unlink(path.c_str());
  return 0;
}

}  // namespace fuzz
