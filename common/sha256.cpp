#include "common/sha256.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
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

namespace {

// "<size> <mtime seconds> <mtime nanoseconds> " — what a cached hash is valid for.
std::string stat_key(const struct stat& st) {
  return std::to_string(static_cast<long long>(st.st_size)) + " " + std::to_string(static_cast<long long>(st.st_mtim.tv_sec)) +
         " " + std::to_string(static_cast<long long>(st.st_mtim.tv_nsec)) + " ";
}

bool is_hex64(const std::string& h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Reads a file front to back on a thread of its own into a ring of buffers, so that the copy
// out of the page cache (a share of hashing a cached file worth taking off: docs/DECISIONS.md,
// "Hashes start first and read ahead") runs beside the hashing.
class ReadAhead {
 public:
  explicit ReadAhead(FILE* f) : f_(f) {
    // Allocated here, and the stream unbuffered (its reads go straight into the slots): the
    // thread allocates nothing.
    setvbuf(f_, nullptr, _IONBF, 0);
    for (Slot& slot : slots_) slot.bytes.resize(kSlotBytes);
    thread_ = std::thread([this] { run(); });
  }
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next chunk of the file, valid until the next call; an empty one at the end.
  std::pair<const char*, size_t> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (holding_) {  // the chunk handed out last time is done with: its slot is free again
      ++consumed_;
      holding_ = false;
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return consumed_ < filled_ || ended_; });
    if (consumed_ == filled_) return {nullptr, 0};
    holding_ = true;
    const Slot& slot = slots_[consumed_ % kSlots];
    return {slot.bytes.data(), slot.size};
  }
  // Whether the file ended in a read error rather than at its end (after next() gave the end).
  bool failed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_;
  }

 private:
  static constexpr uint64_t kSlots = 3;
  static constexpr size_t kSlotBytes = size_t{4} << 20;
  struct Slot {
    std::vector<char> bytes;
    size_t size = 0;
  };
  void run() {
    for (;;) {
      Slot* slot;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stop_ || filled_ - consumed_ < kSlots; });
        if (stop_) return;
        slot = &slots_[filled_ % kSlots];  // neither filled and waiting nor being hashed
      }
      const size_t n = fread(slot->bytes.data(), 1, kSlotBytes, f_);
      std::lock_guard<std::mutex> lock(mutex_);
      if (n > 0) slot->size = n, ++filled_;
      if (n < kSlotBytes) {
        failed_ = ferror(f_) != 0;
        ended_ = true;
        changed_.notify_all();
        return;
      }
      changed_.notify_all();
    }
  }
  FILE* f_;
  Slot slots_[kSlots];
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t filled_ = 0, consumed_ = 0;  // chunks read, chunks hashed
  bool holding_ = false, ended_ = false, failed_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace

std::string cached_sha256(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  char value[256];
  const ssize_t len = fgetxattr(fd, kSha256Xattr, value, sizeof(value) - 1);
  if (len <= 0) return "";
  value[len] = '\0';
  const std::string v(value), key = stat_key(st);
  if (v.compare(0, key.size(), key) != 0) return "";  // the file changed since
  const std::string hex = v.substr(key.size());
  return is_hex64(hex) ? hex : "";
}

std::string sha256_file(const std::string& path, const std::atomic<bool>* cancel) {
  // Opening a FIFO blocks until something writes to it (a background hash would then hang
  // the tool's exit): only regular files are hashed.
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail_file(path, "is not a regular file");
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
  const int fd = fileno(f);
  if (std::string hex = cached_sha256(fd); !hex.empty()) {
    fclose(f);
    return hex;
  }
  struct stat before{};
  const bool regular = fstat(fd, &before) == 0 && S_ISREG(before.st_mode);
  Sha256 s;
  bool err = false, cancelled = false;
  {
    ReadAhead reader(f);
    for (auto chunk = reader.next(); chunk.second > 0; chunk = reader.next()) {
      cancelled = cancel && cancel->load(std::memory_order_relaxed);
      if (cancelled) break;
      s.update(chunk.first, chunk.second);
    }
    err = reader.failed();
  }  // the reading thread is gone before the file is closed
  if (cancelled) {
    fclose(f);
    return "";
  }
  std::string hex;
  if (!err) hex = s.hex_digest();
  // Cache it for the next reader, unless the file changed while it was read. Best effort:
  // a file system without user attributes, or a read-only file, just is not cached.
  struct stat after{};
  if (!err && regular && fstat(fd, &after) == 0 && stat_key(after) == stat_key(before)) {
    const std::string v = stat_key(after) + hex;
    fsetxattr(fd, kSha256Xattr, v.data(), v.size(), 0);
  }
  fclose(f);
  if (err) fail_file(path, "read error while hashing (is it a folder?)");
  return hex;
}

}  // namespace cae
