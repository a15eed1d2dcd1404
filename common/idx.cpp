#include "common/idx.h"

#include <archive.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/bounded_read.h"
#include "common/error.h"
#include "common/sha256.h"

namespace cae {

const char* const kFashionMnistClassNames[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                  "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

namespace {

// sha256 of Fashion-MNIST's decompressed train-labels-idx1-ubyte (identical in the official
// download and Debian's dataset-fashion-mnist): how the class names are recognised.
constexpr const char* kFashionTrainLabelsSha256 = "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9";

// No IDX file of this toolkit's datasets is near this; a header claiming more is damaged.
constexpr uint64_t kMaxIdxBytes = uint64_t(1) << 32;
constexpr uint64_t kMaxCompressedBytes = uint64_t(1) << 31;

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail_file(path, std::string("cannot open: ") + strerror(errno));
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file");
  if (uint64_t(st.st_size) > kMaxCompressedBytes) fail_file(path, "is larger than 2 GB: not an IDX file this toolkit reads");
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "rb"), fclose);
  if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
  std::vector<uint8_t> buf(static_cast<size_t>(st.st_size));
  if (fread(buf.data(), 1, buf.size(), f.get()) != buf.size()) fail_file(path, "short read");
  return buf;
}

// Checks the header (magic, dimension count) and returns the total byte count it implies.
uint64_t idx_total_bytes(const std::string& name, const uint8_t* head, size_t have, int ndim,
                         std::vector<uint32_t>& dims) {
  if (have < 4) fail_file(name, "is truncated: " + std::to_string(have) + " bytes, no IDX header");
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != ndim) {
    char magic[16];
    snprintf(magic, sizeof magic, "0x%02X%02X%02X%02X", head[0], head[1], head[2], head[3]);
    fail_file(name, std::string("wrong magic number ") + magic + ", expected 0x000008" + (ndim == 1 ? "01" : "03") +
                        " (IDX unsigned bytes, " + std::to_string(ndim) + " dimension" + (ndim == 1 ? "" : "s") + ")");
  }
  const size_t header = 4 + 4 * size_t(ndim);
  if (have < header) fail_file(name, "is truncated: the IDX header needs " + std::to_string(header) + " bytes");
  dims.assign(size_t(ndim), 0);
  uint64_t total = 1;
  for (int d = 0; d < ndim; ++d) {
    dims[d] = be32(head + 4 + 4 * d);
    if (d > 0 && dims[d] == 0) fail_file(name, "dimension " + std::to_string(d) + " is 0");
    total *= dims[d];
    if (total > kMaxIdxBytes) fail_file(name, "header claims more than 4 GB of data: damaged file");
  }
  return header + total;
}


// Decompresses a gzip stream. The IDX header and the gzip trailer (ISIZE: the uncompressed
// size mod 2^32) are claims, checked against each other first; memory then follows the bytes
// the stream actually delivers (a forged trailer agrees with any header).
std::vector<uint8_t> gunzip_idx(const std::string& name, const std::vector<uint8_t>& gz, int ndim) {
  if (gz.size() < 18) fail_file(name, "is truncated: too short for a gzip file");
  const uint8_t* t = gz.data() + gz.size() - 4;
  const uint32_t isize = uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 | uint32_t(t[3]) << 24;
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_raw(a.get());
  archive_entry* entry;
  if (archive_read_open_memory(a.get(), gz.data(), gz.size()) != ARCHIVE_OK ||
      archive_read_next_header(a.get(), &entry) != ARCHIVE_OK)
    fail_file(name, "corrupt gzip stream: " + archive_message(a.get()));
  auto read_exact = [&](uint8_t* out, size_t n) -> size_t {
    size_t got = 0;
    while (got < n) {
      la_ssize_t r = archive_read_data(a.get(), out + got, n - got);
      if (r < 0) fail_file(name, "corrupt or truncated gzip stream: " + archive_message(a.get()));
      if (r == 0) break;
      got += size_t(r);
    }
    return got;
  };
  uint8_t head[4 + 4 * 3];
  const size_t header = 4 + 4 * size_t(ndim);
  size_t got = read_exact(head, 4);
  if (got == 4 && head[3] == ndim) got += read_exact(head + 4, header - 4);
  std::vector<uint32_t> dims;
  const uint64_t total = idx_total_bytes(name, head, got, ndim, dims);
  if ((total & 0xFFFFFFFFu) != isize)
    fail_file(name, "is truncated or damaged: the IDX header says " + std::to_string(total) +
                        " bytes but the gzip stream holds " + std::to_string(isize));
  // One byte past the declared size tells a stream longer than its header.
  std::vector<uint8_t> out = read_growing(read_exact, total + 1, total, std::vector<uint8_t>(head, head + header));
  if (out.size() < total)
    fail_file(name, "is truncated: " + std::to_string(out.size()) + " bytes, the header says " + std::to_string(total));
  if (out.size() > total) fail_file(name, "has more data than its IDX header says (" + std::to_string(total) + " bytes)");
  return out;
}

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

}  // namespace

IdxArray parse_idx(const std::string& name, const uint8_t* data, size_t size, int ndim, int64_t keep) {
  std::vector<uint32_t> dims;
  const uint64_t total = idx_total_bytes(name, data, size, ndim, dims);
  if (size != total)
    fail_file(name, std::string(size < total ? "is truncated: " : "has trailing data: ") + std::to_string(size) +
                        " bytes, the IDX header says " + std::to_string(total));
  const size_t header = 4 + 4 * size_t(ndim);
  const uint64_t row = (total - header) / std::max<uint32_t>(1, dims[0]);
  const uint64_t rows = keep > 0 ? std::min<uint64_t>(uint64_t(keep), dims[0]) : dims[0];
  IdxArray a;
  a.dims = dims;
  a.dims[0] = uint32_t(rows);
  a.rows_in_file = dims[0];
  a.data.assign(data + header, data + header + rows * row);
  return a;
}

IdxArray read_idx_file(const std::string& path, int ndim, int64_t keep) {
  std::vector<uint8_t> bytes = read_file_bytes(path);
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) bytes = gunzip_idx(path, bytes, ndim);
  return parse_idx(path, bytes.data(), bytes.size(), ndim, keep);
}

std::vector<std::string> find_idx_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const char* stem : {"train-images", "train-labels", "t10k-images", "t10k-labels"}) {
    const std::string kind = std::strstr(stem, "images") ? "idx3-ubyte" : "idx1-ubyte";
    std::string found;
    for (const char* sep : {"-", "."})
      for (const char* ext : {"", ".gz"}) {
        const std::string p = folder + "/" + stem + sep + kind + ext;
        if (found.empty() && exists(p)) found = p;
      }
    if (found.empty()) return out.empty() ? out : std::vector<std::string>{};
    out.push_back(found);
  }
  return out;
}

IdxDataset read_idx_folder(const std::string& folder, int64_t train_limit, int64_t test_limit,
                           const std::vector<std::string>& names) {
  IdxDataset d;
  d.files = find_idx_files(folder);
  if (d.files.size() != 4)
    fail_file(folder, "missing IDX files (expected train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                      "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each raw or .gz)");
  IdxArray labels[2], images[2];
  for (int s = 0; s < 2; ++s) {
    const int64_t keep = s == 0 ? train_limit : test_limit;
    images[s] = read_idx_file(d.files[2 * s], 3, keep);
    labels[s] = read_idx_file(d.files[2 * s + 1], 1, 0);  // all: every label is checked
  }

  std::string lower = folder;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  // The names: given, recognised (Fashion-MNIST's training labels are one known file), or digits.
  std::vector<uint8_t> raw_train_labels;
  if (!names.empty()) {
    d.class_names = names;
    d.name = "idx";
  } else {
    std::vector<uint8_t> bytes = read_file_bytes(d.files[1]);
    if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) bytes = gunzip_idx(d.files[1], bytes, 1);
    const bool fashion = sha256_hex(bytes.data(), bytes.size()) == kFashionTrainLabelsSha256 ||
                         lower.find("fashion") != std::string::npos;
    if (fashion) {
      d.class_names.assign(kFashionMnistClassNames, kFashionMnistClassNames + 10);
      d.name = "fashion-mnist";
    } else {
      for (int c = 0; c < 10; ++c) d.class_names.push_back(std::to_string(c));
      d.name = lower.find("mnist") != std::string::npos ? "mnist" : "idx";
    }
  }
  if (d.class_names.size() > 256) fail_file(folder, "more than 256 class names");

  for (int s = 0; s < 2; ++s) {
    const std::string& img_file = d.files[2 * s];
    const std::string& lab_file = d.files[2 * s + 1];
    const IdxArray& im = images[s];
    const IdxArray& lb = labels[s];
    ImageSplit& out = s == 0 ? d.train : d.test;
    const uint64_t n_labels = lb.dims[0];
    if (im.rows_in_file != n_labels)
      fail_file(lab_file, "has " + std::to_string(n_labels) + " labels but " + quoted_name(img_file) + " has " +
                              std::to_string(im.rows_in_file) + " images");
    for (uint64_t i = 0; i < n_labels; ++i)
      if (lb.data[i] >= d.class_names.size())
        fail_file(lab_file, "record " + std::to_string(i) + " has label " + std::to_string(lb.data[i]) + ", expected 0.." +
                                std::to_string(d.class_names.size() - 1));
    if (im.dims[1] > 65535 || im.dims[2] > 65535)
      fail_file(img_file, "images of " + std::to_string(im.dims[1]) + "x" + std::to_string(im.dims[2]) +
                              " pixels: at most 65535 a side");
    out.C = 1, out.H = int(im.dims[1]), out.W = int(im.dims[2]);
    out.images.assign(im.data.begin(), im.data.end());
    out.labels.assign(lb.data.begin(), lb.data.begin() + static_cast<std::ptrdiff_t>(im.dims[0]));
  }
  return d;
}

}  // namespace cae
