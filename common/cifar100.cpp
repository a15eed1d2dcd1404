#include "common/cifar100.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/whole_file.h"

namespace cae {
namespace {

// The official train.bin is 153,700,000 bytes; anything past 1 GB is not CIFAR-100.
constexpr int64_t kMaxFileBytes = int64_t(1) << 30;

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

std::string file_size_problem(int64_t bytes) {
  return bytes > kMaxFileBytes ? "is larger than 1 GB: not a CIFAR-100 file" : "";
}

std::string member_size_problem(int64_t bytes) {
  return bytes < 0 || bytes > kMaxFileBytes ? "has an impossible size " + std::to_string(bytes) : "";
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
  if (!folder)
    members = read_archive_members(
        input, {"train.bin", "test.bin", "fine_label_names.txt", "coarse_label_names.txt"}, member_size_problem);
  Cifar100 d;
  auto get = [&](const std::string& base, bool required, std::vector<uint8_t>& out, std::string& label) -> bool {
    label = folder ? input + "/" + base : input + ":" + base;
    if (folder) {
      if (!exists(input + "/" + base)) {
        if (required) fail_file(input, "missing " + base + " (expected the official cifar-100-binary layout)");
        return false;
      }
      out = read_regular_file(input + "/" + base, file_size_problem);
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
