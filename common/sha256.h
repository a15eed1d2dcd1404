// SHA-256 for the `inputs` provenance attribute, through OpenSSL's libcrypto (which uses
// the CPU's SHA extensions, several times a portable implementation: docs/DECISIONS.md,
// "OpenSSL for SHA-256").
#pragma once
#include <atomic>
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
//
// Each file is hashed once (issue 17): the digest is kept in the file's extended attribute
// kSha256Xattr as "<size> <mtime s> <mtime ns> <hex>", and a later call whose file still has
// that size and modification time takes it from there instead of reading gigabytes again
// (report does the same). Writing the file changes its modification time, so a changed file
// is hashed afresh; where user attributes are not supported nothing is cached.
// docs/DECISIONS.md, "Each file hashed once".
inline constexpr const char* kSha256Xattr = "user.cifarae.sha256";
// With `cancel`, the hashing stops at the next MB read once *cancel is set, and returns ""
// (nothing cached): a tool that fails early does not wait for gigabytes it no longer needs.
std::string sha256_file(const std::string& path, const std::atomic<bool>* cancel = nullptr);
// The cached digest of the open file `fd`, or "" when there is none or it is stale.
std::string cached_sha256(int fd);

}  // namespace cae
