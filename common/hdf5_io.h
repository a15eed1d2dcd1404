// HDF5 reading and writing for every file the toolkit exchanges (see docs/FORMATS.md).
//
// Both classes throw std::runtime_error("<file>: <problem>") on any failure, with HDF5's
// own error stack silenced, so a tool prints one clear line instead of a library dump.
// Readers check dtype and shape before they copy anything: a file written by somebody
// else is untrusted input. shape() (which every read and require() goes through) also
// checks that the claimed shape is backed by data stored in the file, so no caller sizes
// a buffer from a shape the file cannot fill; files with external links, external
// storage or virtual datasets are refused when opened (foreign_storage, hdf5_probe.h).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

// Hdf5Reader opens a file only after the metadata probe (the reader sandbox) walked it.
#include "common/hdf5_probe.h"
#include "common/half.h"
#include "common/memory_limit.h"
// deflated_share: whether deflate pays, judged by the writer's own compressor.
#include "common/deflate_chunks.h"
// Every dataset written carries block checksums, checked by every read.
#include "common/hdf5_checksum.h"

namespace cae {

using Shape = std::vector<uint64_t>;
std::string shape_str(const Shape& s);  // "[50000,3,32,32]"

// Element types the toolkit stores. Each maps to one HDF5 native type.
template <typename T> struct H5Type;
template <> struct H5Type<uint8_t> { static hid_t id() { return H5T_NATIVE_UINT8; } static const char* name() { return "uint8"; } };
template <> struct H5Type<int32_t> { static hid_t id() { return H5T_NATIVE_INT32; } static const char* name() { return "int32"; } };
template <> struct H5Type<int64_t> { static hid_t id() { return H5T_NATIVE_INT64; } static const char* name() { return "int64"; } };
template <> struct H5Type<float>   { static hid_t id() { return H5T_NATIVE_FLOAT; } static const char* name() { return "float32"; } };
template <> struct H5Type<double>  { static hid_t id() { return H5T_NATIVE_DOUBLE; } static const char* name() { return "float64"; } };
// IEEE binary16, little-endian, defined as h5py defines numpy's float16 (HDF5 has no
// predefined one before 1.14.4), so that h5py reads these datasets as float16 arrays.
hid_t ieee_f16_type();
template <> struct H5Type<Half>    { static hid_t id() { return ieee_f16_type(); } static const char* name() { return "float16"; } };

struct DatasetOptions {
  uint64_t chunk_rows = 0;  // chunk along the first axis; 0 = contiguous (no compression)
  int deflate = 0;          // 0..9, needs chunk_rows > 0 (whole-chunk writes compress in parallel)
};

class Hdf5Writer {
 public:
  // Creates (truncates) `path`. Tools pass AtomicOutput::temp_path() here and name the
  // final file in messages via `display_name`.
  explicit Hdf5Writer(const std::string& path, const std::string& display_name = "");
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;
  void close();  // flushes; errors surface here rather than in the destructor

  // Intermediate groups are created as needed ("/train/images" creates "/train").
  template <typename T>
  void write(const std::string& name, const T* data, const Shape& shape, DatasetOptions opt = {});
  template <typename T>
  void write(const std::string& name, const std::vector<T>& v) {
    write(name, v.data(), Shape{v.size()});
  }

  // Streaming: create a dataset of the full shape, then fill it a block of rows at a time.
  template <typename T>
  void create(const std::string& name, const Shape& shape, DatasetOptions opt = {});
  template <typename T>
  void write_rows(const std::string& name, uint64_t row0, uint64_t rows, const T* data);

  // Attributes on a group or dataset ("/" for the root).
  void set_attr(const std::string& obj, const std::string& key, const std::string& value);
  void set_attr(const std::string& obj, const std::string& key, const char* value) { set_attr(obj, key, std::string(value)); }
  void set_attr(const std::string& obj, const std::string& key, double value);
  void set_attr(const std::string& obj, const std::string& key, int64_t value);
  void set_attr(const std::string& obj, const std::string& key, int value) { set_attr(obj, key, static_cast<int64_t>(value)); }
  void set_attr(const std::string& obj, const std::string& key, const std::vector<double>& values);
  void set_attr(const std::string& obj, const std::string& key, const std::vector<int64_t>& values);
  void set_attr(const std::string& obj, const std::string& key, const std::vector<std::string>& values);

  const std::string& name() const { return display_; }

 private:
  void ensure_parent_groups(const std::string& name);
  void create_raw(const std::string& name, hid_t type, const Shape& shape, DatasetOptions opt);
  void write_rows_raw(const std::string& name, hid_t type, uint64_t row0, uint64_t rows, const void* data);
  void start_writeback(size_t bytes_written);
  hid_t file_ = -1;
  std::string display_;
  std::map<std::string, h5::DatasetChecksum> sums_;  // every dataset of rank >= 1, stored by close()
};

class Hdf5Reader {
 public:
  // Refuses a file the metadata probe (hdf5_probe.h) cannot walk.
  explicit Hdf5Reader(const std::string& path);
  ~Hdf5Reader();
  Hdf5Reader(const Hdf5Reader&) = delete;
  Hdf5Reader& operator=(const Hdf5Reader&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const;  // dataset or group
  Shape shape(const std::string& name) const;

  // Reads a whole dataset; throws unless its stored type is exactly T and, when
  // `expect` is non-empty, its shape equals it (0 in `expect` matches any extent).
  template <typename T>
  std::vector<T> read(const std::string& name, const Shape& expect = {}) const;
  // Reads rows [row0, row0+rows) of a dataset whose type is exactly T.
  template <typename T>
  void read_rows(const std::string& name, uint64_t row0, uint64_t rows, T* out) const;
  // Rows [row0, row0+rows) of a dataset of T's kind (any integer type into an integer T, any
  // float type into a float T), converted by HDF5 while it reads: a plain feature file's
  // float64 features become float32, its int16 or int64 labels int64. Throws when the kinds
  // differ (a float dataset is never read as integers).
  template <typename T>
  void read_rows_converting(const std::string& name, uint64_t row0, uint64_t rows, T* out) const;
  // True when the dataset is stored as a 2-byte float (float16).
  bool holds_float16(const std::string& name) const;
  // Rows [row0, row0+rows) of a float dataset as float32: float32 as stored, float16 widened
  // (exactly) as every core reads its piece, float64 as read_rows_converting.
  void read_floats(const std::string& name, uint64_t row0, uint64_t rows, float* out) const;
  // Rows of a float16 dataset (holds_float16) as halves, on every core for the layouts the
  // toolkit writes; another byte order is converted by HDF5.
  void read_halves(const std::string& name, uint64_t row0, uint64_t rows, Half* out) const;
  // Throws "<file>: <name> has shape X, expected Y" / "... is missing".
  Shape require(const std::string& name, const Shape& expect) const;

  bool has_attr(const std::string& obj, const std::string& key) const;
  std::string attr_string(const std::string& obj, const std::string& key) const;
  double attr_double(const std::string& obj, const std::string& key) const;
  int64_t attr_int(const std::string& obj, const std::string& key) const;
  std::vector<double> attr_doubles(const std::string& obj, const std::string& key) const;
  // An integer attribute (scalar or 1-d array) as int64; throws when it is not integer.
  std::vector<int64_t> attr_ints(const std::string& obj, const std::string& key) const;
  std::vector<std::string> attr_strings(const std::string& obj, const std::string& key) const;

  // Checks the root `format` attribute (and that format_version is supported). `written_by`:
  // the tool that writes such files, named in the error so that it says how to make one
  // (each format's reader knows its writer; "" names none).
  void require_format(const std::string& format, const std::string& written_by = "", int max_version = 1) const;

 private:
  void check_type(const std::string& name, hid_t want, const char* want_name) const;
  void check_kind(const std::string& name, hid_t want) const;  // same class (integer or float) as `want`
  // A numeric attribute's values (at most 2^24) converted to T by HDF5; `integers_only`
  // refuses a floating-point attribute.
  template <typename T>
  std::vector<T> attr_numbers(const std::string& obj, const std::string& key, bool integers_only) const;
  void read_raw(const std::string& name, hid_t type, uint64_t row0, uint64_t rows, void* out) const;
  // The fast path of read_raw for unfiltered contiguous data (the deflated chunks' is
  // read_deflated_chunks); false = not handled here (read_raw then calls H5Dread). Needs the
  // stored type to equal `type` exactly.
  // widen_halves: `type` is float16 and `out` receives floats (read_floats).
  bool read_contiguous_parallel(hid_t ds, hid_t type, const std::string& name, const std::vector<hsize_t>& dims,
                                uint64_t row0, uint64_t rows, void* out, bool widen_halves = false) const;
  hid_t open_attr(const std::string& obj, const std::string& key) const;
  hid_t file_ = -1;
  std::string path_;
  uint64_t file_bytes_ = 0;  // the file's size: no dataset can hold more than this
};

// ---- template definitions ----------------------------------------------------------------
template <typename T>
void Hdf5Writer::create(const std::string& name, const Shape& shape, DatasetOptions opt) {
  create_raw(name, H5Type<T>::id(), shape, opt);
}
template <typename T>
void Hdf5Writer::write_rows(const std::string& name, uint64_t row0, uint64_t rows, const T* data) {
  write_rows_raw(name, H5Type<T>::id(), row0, rows, data);
}
template <typename T>
void Hdf5Writer::write(const std::string& name, const T* data, const Shape& shape, DatasetOptions opt) {
  create_raw(name, H5Type<T>::id(), shape, opt);
  if (shape.empty() || shape[0] > 0) write_rows_raw(name, H5Type<T>::id(), 0, shape.empty() ? 1 : shape[0], data);
}
template <typename T>
std::vector<T> Hdf5Reader::read(const std::string& name, const Shape& expect) const {
  Shape s = expect.empty() ? shape(name) : require(name, expect);
  check_type(name, H5Type<T>::id(), H5Type<T>::name());
  uint64_t count = 1;
  for (auto d : s) count = saturating_product(count, d);
  // A few MB of deflated zeros can declare gigabytes: refused here, not by the allocator.
  require_memory(path_, name, saturating_product(count, sizeof(T)));
  std::vector<T> out(count);
  if (count) read_raw(name, H5Type<T>::id(), 0, s.empty() ? 1 : s[0], out.data());
  return out;
}
template <typename T>
void Hdf5Reader::read_rows(const std::string& name, uint64_t row0, uint64_t rows, T* out) const {
  check_type(name, H5Type<T>::id(), H5Type<T>::name());
  if (rows) read_raw(name, H5Type<T>::id(), row0, rows, out);
}
template <typename T>
void Hdf5Reader::read_rows_converting(const std::string& name, uint64_t row0, uint64_t rows, T* out) const {
  check_kind(name, H5Type<T>::id());
  if (rows) read_raw(name, H5Type<T>::id(), row0, rows, out);
}

}  // namespace cae
