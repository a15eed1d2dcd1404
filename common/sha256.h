// SHA-256 (FIPS 180-4), for the `inputs` provenance attribute. Small enough to own.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cae {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  std::string hex_digest();  // finalises

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, size_t len);
// Hashes a file; throws "<path>: cannot read" on failure.
std::string sha256_file(const std::string& path);

}  // namespace cae
