#include "common/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common/error.h"

namespace cae {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : impl_(new Impl) {
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) throw std::runtime_error("sha256: OpenSSL init failed");
}
Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t len) { EVP_DigestUpdate(impl_->ctx, data, len); }

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  std::string out;
  char hex[3];
  for (unsigned int i = 0; i < len; ++i) {
    snprintf(hex, sizeof hex, "%02x", md[i]);
    out += hex;
  }
  return out;
}

std::string sha256_hex(const void* data, size_t len) {
  Sha256 s;
  s.update(data, len);
  return s.hex_digest();
}

std::string sha256_file(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
  Sha256 s;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) s.update(buf.data(), n);
  bool err = ferror(f);
  fclose(f);
  if (err) fail_file(path, "read error while hashing (is it a folder?)");
  return s.hex_digest();
}

}  // namespace cae
