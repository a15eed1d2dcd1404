#include "common/cifar_binary.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <vector>

#include "common/error.h"
#include "common/whole_file.h"

namespace cae {
namespace {

const char* const kBatchNames[kCifarTrainBatches + 1] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                                         "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};

std::string batch_size_problem(int64_t bytes) {
  return bytes != kCifarBatchBytes ? "is " + std::to_string(bytes) + " bytes, expected " + std::to_string(kCifarBatchBytes) : "";
}

// A batch file on disk is told its record layout too.
std::string batch_file_size_problem(int64_t bytes) {
  const std::string problem = batch_size_problem(bytes);
  return problem.empty() ? problem : problem + " (10,000 records of 3,073 bytes)";
}

bool is_directory(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

namespace {

// Checks a batch's size and every label (also of records beyond `keep`: a damaged file is
// an error), and puts its first `keep` records into labels[0..keep) and images[0..keep).
void parse_batch_into(const std::string& name, const uint8_t* data, size_t size, int64_t keep, uint8_t* labels,
                      uint8_t* images) {
  const std::string problem = batch_size_problem(static_cast<int64_t>(size));
  if (!problem.empty()) fail_file(name, problem);
  for (int64_t r = 0; r < kCifarBatchRecords; ++r) {
    uint8_t label = data[r * kCifarRecordBytes];
    if (label >= kCifar10Classes)
      fail_file(name, "record " + std::to_string(r) + " has label " + std::to_string(label) + ", expected 0..9");
    if (r < keep) {
      labels[r] = label;
      memcpy(images + r * kCifarImageBytes, data + r * kCifarRecordBytes + 1, kCifarImageBytes);
    }
  }
}

}  // namespace

void parse_cifar_batch(const std::string& name, const uint8_t* data, size_t size, ImageSplit& out, int64_t keep) {
  const std::string problem = batch_size_problem(static_cast<int64_t>(size));
  if (!problem.empty()) fail_file(name, problem);
  keep = std::clamp<int64_t>(keep, 0, kCifarBatchRecords);
  out.C = kCifarChannels, out.H = kCifarHeight, out.W = kCifarWidth;
  size_t n0 = out.labels.size();
  out.labels.resize(n0 + static_cast<size_t>(keep));
  out.images.resize((n0 + static_cast<size_t>(keep)) * kCifarImageBytes);
  parse_batch_into(name, data, size, keep, out.labels.data() + n0, out.images.data() + n0 * kCifarImageBytes);
}

CifarBinary read_cifar_binary(const std::string& input, int64_t train_limit, int64_t test_limit) {
  struct stat st;
  if (stat(input.c_str(), &st) != 0) fail_file(input, std::string("cannot open: ") + strerror(errno));
  std::map<std::string, std::vector<uint8_t>> batches;
  bool folder = is_directory(input);
  if (!folder)
    batches = read_archive_members(input, std::vector<std::string>(std::begin(kBatchNames), std::end(kBatchNames)),
                                   batch_size_problem);
  // Called from one thread per batch: each moves out its own member of the archive's map.
  auto batch = [&](const char* base) -> std::vector<uint8_t> {
    if (folder) {
      std::string path = input + "/" + base;
      struct stat file;
      if (stat(path.c_str(), &file) != 0) fail_file(input, std::string("missing ") + base + " (expected the official cifar-10-batches-bin layout)");
      return read_regular_file(path, batch_file_size_problem);
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
  const int64_t train_keep = train_limit > 0 ? train_limit : kCifarBatchRecords * kCifarTrainBatches;
  const int64_t train_total = std::min<int64_t>(train_keep, kCifarBatchRecords * kCifarTrainBatches);
  const int64_t test_total = std::clamp<int64_t>(test_limit > 0 ? test_limit : kCifarBatchRecords, 0, kCifarBatchRecords);
  for (ImageSplit* split : {&out.train, &out.test}) split->C = kCifarChannels, split->H = kCifarHeight, split->W = kCifarWidth;
  out.train.labels.resize(static_cast<size_t>(train_total));
  out.train.images.resize(static_cast<size_t>(train_total) * kCifarImageBytes);
  out.test.labels.resize(static_cast<size_t>(test_total));
  out.test.images.resize(static_cast<size_t>(test_total) * kCifarImageBytes);
  // The six batches are read and parsed at once, each into its own rows of its split (the
  // archive's members are already in memory); the first failing batch, in file order, is
  // the error.
  std::vector<std::future<void>> parsing;
  for (int b = 0; b <= kCifarTrainBatches; ++b) {
    const bool test = b == kCifarTrainBatches;
    ImageSplit& split = test ? out.test : out.train;
    const int64_t first = test ? 0 : int64_t{b} * kCifarBatchRecords;
    const int64_t keep = test ? test_total : std::clamp<int64_t>(train_total - first, 0, kCifarBatchRecords);
    uint8_t* labels = split.labels.data() + (keep > 0 ? first : 0);
    uint8_t* images = split.images.data() + (keep > 0 ? first : 0) * kCifarImageBytes;
    parsing.push_back(std::async(std::launch::async, [&batch, &label_of, b, keep, labels, images] {
      const std::vector<uint8_t> data = batch(kBatchNames[b]);
      parse_batch_into(label_of(kBatchNames[b]), data.data(), data.size(), keep, labels, images);
    }));
  }
  for (std::future<void>& f : parsing) f.wait();  // none left running when one has failed
  for (std::future<void>& f : parsing) f.get();
  return out;
}

}  // namespace cae
