#include "common/dataset_sources.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>

#include "common/cifar100.h"
#include "common/cifar_binary.h"
#include "common/class_names.h"
#include "common/error.h"
#include "common/idx.h"
#include "common/image_folder.h"
#include "common/sha256.h"

namespace cae {
namespace {

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// A folder input is hashed file by file (the hash of their digests in reading order), so
// its provenance is stable. The files are hashed on every core at once: one core's SHA-256
// would make CIFAR-10's six batches (184 MB) a visible wait (docs/DECISIONS.md, "OpenSSL for
// SHA-256"). The first failing file, in reading
// order, is the error.
InputFile hash_files(const std::string& input, const std::vector<std::string>& files) {
  const int64_t n = static_cast<int64_t>(files.size());
  std::vector<std::string> digests(files.size());
  std::vector<std::exception_ptr> failures(files.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      digests[size_t(i)] = sha256_file(files[size_t(i)]);
    } catch (...) {
      failures[size_t(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
  Sha256 all;
  for (const std::string& h : digests) all.update(h.data(), h.size());
  return {input, all.hex_digest()};
}

InputFile hash_cifar10_input(const std::string& input) {
  std::vector<std::string> files;
  for (const char* base : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                           "data_batch_5.bin", "test_batch.bin"})
    if (exists(input + "/" + base)) files.push_back(input + "/" + base);
  struct stat st;
  const bool folder = stat(input.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return folder ? hash_files(input, files) : hash_input(input);
}

// The format of an archive from its first recognisable member name; "" when none is found
// or the archive does not open (its reader then reports the damage in its own words).
std::string peek_archive_format(const std::string& path) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) return "";
  archive_entry* entry;
  while (archive_read_next_header(a.get(), &entry) == ARCHIVE_OK) {
    const char* p = archive_entry_pathname(entry);
    const std::string name = p ? p : "";
    const std::string base = name.substr(name.find_last_of('/') + 1);
    if (base.rfind("data_batch_", 0) == 0 || base == "test_batch.bin") return "cifar10";
    if (base == "train.bin" || base == "test.bin" || base == "fine_label_names.txt" || base == "coarse_label_names.txt")
      return "cifar100";
    if (archive_read_data_skip(a.get()) != ARCHIVE_OK) return "";
  }
  return "";
}

}  // namespace

std::string detect_source_format(const std::string& input) {
  struct stat st;
  if (stat(input.c_str(), &st) != 0) fail_file(input, std::string("cannot open: ") + strerror(errno));
  if (!S_ISDIR(st.st_mode)) {
    const std::string peeked = peek_archive_format(input);
    if (!peeked.empty()) return peeked;
    std::string base = input.substr(input.find_last_of('/') + 1);
    for (char& c : base) c = char(std::tolower(static_cast<unsigned char>(c)));
    return base.find("cifar-100") != std::string::npos || base.find("cifar100") != std::string::npos ? "cifar100"
                                                                                                      : "cifar10";
  }
  if (exists(input + "/data_batch_1.bin") || exists(input + "/test_batch.bin")) return "cifar10";
  if (is_cifar100_folder(input)) return "cifar100";
  if (!find_idx_files(input).empty()) return "idx";
  if (is_image_folder(input)) return "folder";
  // CIFAR-10 first in the message: it is what this tool read before the other formats.
  fail_file(input, "missing data_batch_1.bin (expected the official cifar-10-batches-bin layout), and no CIFAR-100 "
                   "train.bin/test.bin, IDX train-images-idx3-ubyte[.gz] or image folder train/CLASS/ either; "
                   "--format forces one");
}

SourceDataset read_source(const std::string& input, const SourceOptions& opt) {
  SourceDataset d;
  d.format = opt.format.empty() ? detect_source_format(input) : opt.format;
  const bool image_opts = opt.channels != 0 || opt.height != 0 || opt.skip_bad;
  if (image_opts && d.format != "folder")
    throw UsageError("--image-size, --color and --skip-bad apply to image folders, not to " + d.format + " input");
  if (opt.labels != "fine" && d.format != "cifar100") throw UsageError("--labels applies to CIFAR-100 input only");
  if (d.format == "cifar10") {
    CifarBinary c = read_cifar_binary(input, opt.train_limit, opt.test_limit);
    d.train = std::move(c.train), d.test = std::move(c.test);
    d.class_names = cifar10_class_names();
    d.name = "cifar-10";
    d.input = hash_cifar10_input(input);
  } else if (d.format == "idx") {
    IdxDataset x = read_idx_folder(input, opt.train_limit, opt.test_limit);
    d.train = std::move(x.train), d.test = std::move(x.test);
    d.class_names = std::move(x.class_names);
    d.name = x.name;
    d.input = hash_files(input, x.files);
  } else if (d.format == "cifar100") {
    if (opt.labels != "fine" && opt.labels != "coarse") throw UsageError("--labels must be fine or coarse");
    Cifar100 c = read_cifar100(input, opt.labels == "coarse", opt.train_limit, opt.test_limit);
    d.train = std::move(c.train), d.test = std::move(c.test);
    d.class_names = std::move(c.class_names);
    d.name = "cifar-100";
    d.input = c.files.size() == 1 ? hash_input(input) : hash_files(input, c.files);
  } else if (d.format == "folder") {
    ImageFolderOptions fo;
    fo.channels = opt.channels, fo.height = opt.height, fo.width = opt.width, fo.skip_bad = opt.skip_bad;
    fo.train_limit = opt.train_limit, fo.test_limit = opt.test_limit;
    ImageFolder f = read_image_folder(input, fo);
    d.train = std::move(f.train), d.test = std::move(f.test);
    d.class_names = std::move(f.class_names);
    d.name = "image-folder";
    d.skipped = f.skipped;
    d.input = hash_files(input, f.files);
  } else {
    throw UsageError("--format must be cifar10, idx, cifar100 or folder, not " + quoted_name("'" + d.format + "'"));
  }
  // Folder names and label files are the names' first entrance (common/class_names.h).
  d.class_names = checked_class_names(d.class_names, d.format == "folder" ? input + "/train" : input);
  return d;
}

}  // namespace cae
