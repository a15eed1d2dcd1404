#include "common/cifar100.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include "common/bounded_read.h"
#include "common/error.h"

namespace cae {
namespace {

// The official train.bin is 153,700,000 bytes; anything past 1 GB is not CIFAR-100.
constexpr int64_t kMaxFileBytes = int64_t(1) << 30;

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::vector<uint8_t> read_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail_file(path, std::string("cannot open: ") + strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file");
  if (st.st_size > kMaxFileBytes) fail_file(path, "is larger than 1 GB: not a CIFAR-100 file");
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "rb"), fclose);
  if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  if (fread(buf.data(), 1, buf.size(), f.get()) != buf.size()) fail_file(path, "short read");
  return buf;
}


// The four wanted members of the .tar.gz, by base name.
std::map<std::string, std::vector<uint8_t>> read_archive(const std::string& path) {
  static const char* const kWanted[] = {"train.bin", "test.bin", "fine_label_names.txt", "coarse_label_names.txt"};
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
    if (std::none_of(std::begin(kWanted), std::end(kWanted), [&](const char* w) { return base == w; })) {
      archive_read_data_skip(a.get());
      continue;
    }
    const int64_t size = archive_entry_size(entry);
    if (size < 0 || size > kMaxFileBytes) fail_file(path, quoted_name(name) + " has an impossible size " + std::to_string(size));
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

std::vector<std::string> parse_names(const std::vector<uint8_t>& text) {
  std::vector<std::string> names;
  std::istringstream in(std::string(text.begin(), text.end()));
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

}  // namespace

bool is_cifar100_folder(const std::string& folder) {
  return exists(folder + "/train.bin") && exists(folder + "/test.bin");
}

void parse_cifar100(const std::string& name, const uint8_t* data, size_t size, bool coarse, ImageSplit& out,
                    int64_t keep) {
  if (size == 0 || size % kCifar100RecordBytes != 0)
    fail_file(name, "is " + std::to_string(size) + " bytes, not a whole number of 3,074-byte CIFAR-100 records");
  const int64_t n = static_cast<int64_t>(size) / kCifar100RecordBytes;
  keep = keep > 0 ? std::min(keep, n) : n;
  out.C = kCifarChannels, out.H = kCifarHeight, out.W = kCifarWidth;
  out.labels.resize(static_cast<size_t>(keep));
  out.images.resize(static_cast<size_t>(keep) * kCifarImageBytes);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* rec = data + r * kCifar100RecordBytes;
    if (rec[0] >= kCifar100Coarse || rec[1] >= kCifar100Fine)
      fail_file(name, "record " + std::to_string(r) + " has labels coarse " + std::to_string(rec[0]) + ", fine " +
                          std::to_string(rec[1]) + ", expected 0..19 and 0..99");
    if (r < keep) {
      out.labels[size_t(r)] = coarse ? rec[0] : rec[1];
      memcpy(&out.images[size_t(r) * kCifarImageBytes], rec + 2, kCifarImageBytes);
    }
  }
}

Cifar100 read_cifar100(const std::string& input, bool coarse, int64_t train_limit, int64_t test_limit) {
  struct stat st;
  if (stat(input.c_str(), &st) != 0) fail_file(input, std::string("cannot open: ") + strerror(errno));
  const bool folder = S_ISDIR(st.st_mode);
  std::map<std::string, std::vector<uint8_t>> members;
  if (!folder) members = read_archive(input);
  Cifar100 d;
  auto get = [&](const std::string& base, bool required, std::vector<uint8_t>& out, std::string& label) -> bool {
    label = folder ? input + "/" + base : input + ":" + base;
    if (folder) {
      if (!exists(input + "/" + base)) {
        if (required) fail_file(input, "missing " + base + " (expected the official cifar-100-binary layout)");
        return false;
      }
      out = read_file(input + "/" + base);
      d.files.push_back(input + "/" + base);
      return true;
    }
    auto it = members.find(base);
    if (it == members.end()) {
      if (required) fail_file(input, "archive has no " + base + " (expected cifar-100-binary.tar.gz)");
      return false;
    }
    out = std::move(it->second);
    return true;
  };
  if (folder && !is_cifar100_folder(input))
    fail_file(input, std::string("missing ") + (exists(input + "/train.bin") ? "test.bin" : "train.bin") +
                         " (expected the official cifar-100-binary layout)");
  std::vector<uint8_t> bytes;
  std::string label;
  get("train.bin", true, bytes, label);
  parse_cifar100(label, bytes.data(), bytes.size(), coarse, d.train, train_limit);
  get("test.bin", true, bytes, label);
  parse_cifar100(label, bytes.data(), bytes.size(), coarse, d.test, test_limit);
  if (!folder) d.files = {input};

  const int k = coarse ? kCifar100Coarse : kCifar100Fine;
  const std::string meta = coarse ? "coarse_label_names.txt" : "fine_label_names.txt";
  if (get(meta, false, bytes, label)) {
    d.class_names = parse_names(bytes);
    if (int(d.class_names.size()) != k)
      fail_file(label, "has " + std::to_string(d.class_names.size()) + " names, expected " + std::to_string(k));
  } else {
    for (int c = 0; c < k; ++c) d.class_names.push_back(std::to_string(c));
  }
  return d;
}

}  // namespace cae
