#include "common/cifar_binary.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "common/bounded_read.h"
#include "common/error.h"

namespace cae {
namespace {

const char* const kBatchNames[kCifarTrainBatches + 1] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

std::vector<uint8_t> read_whole_file(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail_file(path, std::string("cannot open: ") + strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file");
  if (st.st_size != kCifarBatchBytes)
    fail_file(path, "is " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(kCifarBatchBytes) +
                        " (10,000 records of 3,073 bytes)");
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "rb"), fclose);
  if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  if (fread(buf.data(), 1, buf.size(), f.get()) != buf.size()) fail_file(path, "short read");
  return buf;
}


// Reads the six batch files out of the .tar.gz into memory, by base name.
std::map<std::string, std::vector<uint8_t>> read_archive(const std::string& path) {
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
    std::string name = entry_name ? entry_name : "";
    std::string base = name.substr(name.find_last_of('/') + 1);
    bool wanted = std::any_of(std::begin(kBatchNames), std::end(kBatchNames), [&](const char* b) { return base == b; });
    if (!wanted) {
      archive_read_data_skip(a.get());
      continue;
    }
    int64_t size = archive_entry_size(entry);
    if (size != kCifarBatchBytes)
      fail_file(path, quoted_name(name) + " is " + std::to_string(size) + " bytes, expected " + std::to_string(kCifarBatchBytes));
    // The header's size is a claim: memory follows the bytes the stream delivers.
    std::vector<uint8_t> buf = read_archive_member(a.get(), path, name, uint64_t(size) + 1, uint64_t(size));
    if (int64_t(buf.size()) != size)
      fail_file(path, quoted_name(name) + ": corrupted or truncated archive (" + std::to_string(buf.size()) + " bytes, its header says " +
                          std::to_string(size) + ")");
    out[base] = std::move(buf);
  }
  if (rc != ARCHIVE_EOF) fail_file(path, "corrupted or truncated archive: " + archive_message(a.get()));
  return out;
}

bool is_directory(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

void parse_cifar_batch(const std::string& name, const uint8_t* data, size_t size, ImageSplit& out, int64_t keep) {
  if (static_cast<int64_t>(size) != kCifarBatchBytes)
    fail_file(name, "is " + std::to_string(size) + " bytes, expected " + std::to_string(kCifarBatchBytes));
  keep = std::clamp<int64_t>(keep, 0, kCifarBatchRecords);
  out.C = kCifarChannels, out.H = kCifarHeight, out.W = kCifarWidth;
  size_t n0 = out.labels.size();
  out.labels.resize(n0 + static_cast<size_t>(keep));
  out.images.resize((n0 + static_cast<size_t>(keep)) * kCifarImageBytes);
  // Every label is checked, also of records beyond `keep`: a damaged file is an error.
  for (int64_t r = 0; r < kCifarBatchRecords; ++r) {
    uint8_t label = data[r * kCifarRecordBytes];
    if (label >= kCifar10Classes)
      fail_file(name, "record " + std::to_string(r) + " has label " + std::to_string(label) + ", expected 0..9");
    if (r < keep) {
      out.labels[n0 + static_cast<size_t>(r)] = label;
      memcpy(&out.images[(n0 + static_cast<size_t>(r)) * kCifarImageBytes], data + r * kCifarRecordBytes + 1, kCifarImageBytes);
    }
  }
}

CifarBinary read_cifar_binary(const std::string& input, int64_t train_limit, int64_t test_limit) {
  struct stat st;
  if (stat(input.c_str(), &st) != 0) fail_file(input, std::string("cannot open: ") + strerror(errno));
  std::map<std::string, std::vector<uint8_t>> batches;
  bool folder = is_directory(input);
  if (!folder) batches = read_archive(input);
  auto batch = [&](const char* base) -> std::vector<uint8_t> {
    if (folder) {
      std::string path = input + "/" + base;
      if (stat(path.c_str(), &st) != 0) fail_file(input, std::string("missing ") + base + " (expected the official cifar-10-batches-bin layout)");
      return read_whole_file(path);
    }
    auto it = batches.find(base);
    if (it == batches.end()) fail_file(input, std::string("archive has no ") + base + " (expected cifar-10-binary.tar.gz)");
    return std::move(it->second);
  };
  auto label_of = [&](const char* base) { return folder ? input + "/" + base : input + ":" + base; };

  // Check every batch exists before parsing any, so the most common mistake (a wrong
  // folder) is reported first and fast.
  if (folder)
    for (const char* base : kBatchNames)
      if (stat((input + "/" + base).c_str(), &st) != 0)
        fail_file(input, std::string("missing ") + base + " (expected the official cifar-10-batches-bin layout)");

  CifarBinary out;
  int64_t train_keep = train_limit > 0 ? train_limit : kCifarBatchRecords * kCifarTrainBatches;
  for (int b = 0; b < kCifarTrainBatches; ++b) {
    std::vector<uint8_t> data = batch(kBatchNames[b]);
    int64_t keep = std::clamp<int64_t>(train_keep - b * kCifarBatchRecords, 0, kCifarBatchRecords);
    parse_cifar_batch(label_of(kBatchNames[b]), data.data(), data.size(), out.train, keep);
  }
  std::vector<uint8_t> test = batch(kBatchNames[kCifarTrainBatches]);
  parse_cifar_batch(label_of(kBatchNames[kCifarTrainBatches]), test.data(), test.size(), out.test,
                    test_limit > 0 ? test_limit : kCifarBatchRecords);
  return out;
}

}  // namespace cae
