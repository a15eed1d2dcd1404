#include "common/whole_file.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/bounded_read.h"
#include "common/error.h"

namespace cae {

std::vector<uint8_t> read_regular_file(const std::string& path, const SizeProblem& size_problem) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail_file(path, std::string("cannot open: ") + strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file");
  const std::string problem = size_problem(st.st_size);
  if (!problem.empty()) fail_file(path, problem);
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "rb"), fclose);
  if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  if (fread(buf.data(), 1, buf.size(), f.get()) != buf.size()) fail_file(path, "short read");
  return buf;
}

std::map<std::string, std::vector<uint8_t>> read_archive_members(const std::string& path,
                                                                 const std::vector<std::string>& wanted,
                                                                 const SizeProblem& size_problem) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK)
    fail_file(path, "cannot open archive: " + archive_message(a.get()));
  std::map<std::string, std::vector<uint8_t>> out;
  archive_entry* entry;
  int rc;
  while ((rc = archive_read_next_header(a.get(), &entry)) == ARCHIVE_OK) {
    const char* entry_name = archive_entry_pathname(entry);
    const std::string name = entry_name ? entry_name : "";
    const std::string base = name.substr(name.find_last_of('/') + 1);
    if (std::find(wanted.begin(), wanted.end(), base) == wanted.end()) {
      archive_read_data_skip(a.get());
      continue;
    }
    const int64_t size = archive_entry_size(entry);
    const std::string problem = size_problem(size);
    if (!problem.empty()) fail_file(path, quoted_name(name) + " " + problem);
    // The header's size is a claim: memory follows the bytes the stream delivers.
    std::vector<uint8_t> buf = read_archive_member(a.get(), path, name, uint64_t(size) + 1, uint64_t(size));
    if (int64_t(buf.size()) != size)
      fail_file(path, quoted_name(name) + ": corrupted or truncated archive (" + std::to_string(buf.size()) +
                          " bytes, its header says " + std::to_string(size) + ")");
    out[base] = std::move(buf);
  }
  if (rc != ARCHIVE_EOF) fail_file(path, "corrupted or truncated archive: " + archive_message(a.get()));
  return out;
}

}  // namespace cae
