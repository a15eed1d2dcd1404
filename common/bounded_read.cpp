#include "common/bounded_read.h"

#include <archive.h>

#include <algorithm>

#include "common/error.h"

namespace cae {

std::vector<uint8_t> read_growing(const ReadSome& read_some, uint64_t limit, uint64_t declared,
                                  std::vector<uint8_t> prefix) {
  constexpr size_t kFirstChunk = size_t(1) << 16;
  std::vector<uint8_t> buf = std::move(prefix);
  size_t have = buf.size();
  while (have < limit) {
    if (have == buf.size() && declared > 0 && have >= declared) {
      // All that was declared arrived: look for more through a small buffer rather than
      // doubling a large one to find the end.
      uint8_t probe[4096];
      const size_t got = read_some(probe, size_t(std::min<uint64_t>(sizeof probe, limit - have)));
      if (got == 0) break;
      buf.insert(buf.end(), probe, probe + got);
      have += got;
      continue;
    }
    if (have == buf.size()) {
      uint64_t next = buf.size() + std::max<uint64_t>(kFirstChunk, buf.size());  // doubling
      if (declared > buf.size()) {
        // Plausible (an eighth arrived): straight to the declared size; else not past it.
        next = declared <= 8 * uint64_t(have) + kFirstChunk ? declared : std::min(next, declared);
      }
      buf.resize(size_t(std::min(limit, next)));
    }
    const size_t got = read_some(buf.data() + have, buf.size() - have);
    if (got == 0) break;
    have += got;
  }
  if (have < buf.size()) {
    buf.resize(have);
    buf.shrink_to_fit();
  }
  return buf;
}

std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m ? m : "unknown error";
}

std::vector<uint8_t> read_archive_member(archive* a, const std::string& name, const std::string& member,
                                         uint64_t limit, uint64_t declared) {
  return read_growing(
      [&](uint8_t* out, size_t n) -> size_t {
        const la_ssize_t r = archive_read_data(a, out, n);
        if (r < 0) fail_file(name, quoted_name(member) + ": corrupted or truncated archive (" + archive_message(a) + ")");
        return size_t(r);
      },
      limit, declared);
}

}  // namespace cae
