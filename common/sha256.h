// SHA-256 for the `inputs` provenance attribute, through OpenSSL's libcrypto (which uses
// the CPU's SHA extensions: ~1.5 GB/s here, 7× a portable implementation).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

namespace cae {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t len);
  std::string hex_digest();  // finalises

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(const void* data, size_t len);
// Hashes a file; throws "<path>: cannot open: ..." on failure.
std::string sha256_file(const std::string& path);

}  // namespace cae
