#include "common/hdf5_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "common/deflate_chunks.h"
#include "common/error.h"
#include "common/hdf5_handle.h"
#include "common/hdf5_probe.h"
#include "common/large_buffer.h"

namespace cae {
namespace {

using h5::Handle;
using h5::row_bytes_of;
using h5::select_rows;
using h5::stored_as;

// HDF5 prints its whole error stack by default; we report one line ourselves.
// H5dont_atexit (first, before anything initialises the library): after a write failed
// (disk full, file size limit) H5Fclose fails and leaves the file half-closed, and the
// library's own atexit clean-up then crashes in H5F__close_cb, turning a clean exit 1 into
// a SIGSEGV. Every file we write is closed explicitly (Hdf5Writer::close) before it is
// committed, and readers have nothing to flush, so skipping that clean-up loses nothing.
struct SilenceHdf5 {
  SilenceHdf5() {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
};
const SilenceHdf5 g_silence;

std::string type_name(hid_t t) {
  H5T_class_t cls = H5Tget_class(t);
  size_t size = H5Tget_size(t);
  if (cls == H5T_INTEGER) {
    bool sign = H5Tget_sign(t) == H5T_SGN_2;
    return std::string(sign ? "int" : "uint") + std::to_string(size * 8);
  }
  if (cls == H5T_FLOAT) return "float" + std::to_string(size * 8);
  if (cls == H5T_STRING) return "string";
  return "a non-numeric type";
}

// True when the stored type `t` is exactly the native type `want` (class, size, sign).
bool same_type(hid_t t, hid_t want) {
  if (H5Tget_class(t) != H5Tget_class(want) || H5Tget_size(t) != H5Tget_size(want)) return false;
  if (H5Tget_class(t) == H5T_INTEGER && H5Tget_sign(t) != H5Tget_sign(want)) return false;
  return true;
}

// Why the dataset's claimed shape is not backed by data in the file, or "" when it is:
// all its chunks exist (chunked), or its contiguous block is as large as the data and
// lies inside the file. A reader sizes buffers from the shape, so this is checked before
// any caller can: a few-KB file must not make a tool allocate (and zero) gigabytes.
// (H5Dget_space_status cannot tell: it calls every compressed dataset partly allocated.)
std::string storage_problem(hid_t ds, uint64_t file_bytes) {
  Handle space(H5Dget_space(ds));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (rank < 0 || points < 0) return "has an unreadable dataspace";
  if (points == 0) return "";
  Handle dcpl(H5Dget_create_plist(ds)), type(H5Dget_type(ds));
  const long double bytes = static_cast<long double>(points) * H5Tget_size(type.get());
  const long double stored = static_cast<long double>(H5Dget_storage_size(ds));
  const long double in_file = static_cast<long double>(file_bytes);
  const std::string never = "but not all of its data was ever written (truncated or corrupted file?)";
  if (stored > in_file) return "claims more stored data than the whole file holds (corrupted file?)";
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_COMPACT) return bytes <= 65536 ? "" : never;  // inside the object header (<64 KB)
  if (layout == H5D_CONTIGUOUS) {
    if (stored < bytes) return never;
    const haddr_t offset = H5Dget_offset(ds);
    if (offset == HADDR_UNDEF || static_cast<long double>(offset) + bytes > in_file)
      return "claims data past the end of the file (truncated or corrupted file?)";
    return "";
  }
  if (layout != H5D_CHUNKED) return "has a storage layout this toolkit does not read";
  std::vector<hsize_t> dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank) return never;
  long double expected = 1;
  for (int d = 0; d < rank; ++d) {
    if (chunk[d] == 0) return never;
    expected *= static_cast<long double>((dims[d] + chunk[d] - 1) / chunk[d]);
  }
  hsize_t n_chunks = 0;
  if (H5Dget_num_chunks(ds, space.get(), &n_chunks) < 0 || static_cast<long double>(n_chunks) < expected) return never;
  // Unfiltered chunks hold their bytes as they are; deflate shrinks data at most ~1032:1.
  const long double max_ratio = H5Pget_nfilters(dcpl.get()) > 0 ? 1100.0L : 1.0L;
  if (stored * max_ratio < bytes) return never;
  return "";
}

uint64_t file_size_of(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : UINT64_MAX;
}

}  // namespace

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

hid_t ieee_f16_type() {
  // As h5py's IEEE_F16LE: sign bit 15, exponent bits 10-14 (bias 15), mantissa bits 0-9.
  // Locked: a predefined-like type that H5Tclose leaves alone; made once, by the thread
  // that first needs it (HDF5 is entered by one thread at a time).
  static const hid_t type = [] {
    const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0 || H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 15) < 0 ||
        H5Tlock(t) < 0)
      throw std::runtime_error("HDF5: cannot define the float16 type");
    return t;
  }();
  return type;
}

// ---- writer ------------------------------------------------------------------------------
Hdf5Writer::Hdf5Writer(const std::string& path, const std::string& display_name)
    : display_(display_name.empty() ? path : display_name) {
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file_ < 0) fail_file(display_, "cannot create HDF5 file (check that the folder exists and is writable)");
}

Hdf5Writer::~Hdf5Writer() {
  if (file_ >= 0) H5Fclose(file_);
}

void Hdf5Writer::close() {
  if (file_ < 0) return;
  for (const auto& [name, sum] : sums_) {
    Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
    if (!ds.ok() || !sum.store(ds.get())) fail_file(display_, "cannot write the checksum of " + name);
  }
  sums_.clear();
  herr_t flush = H5Fflush(file_, H5F_SCOPE_GLOBAL);
  herr_t st = H5Fclose(file_);
  file_ = -1;
  if (flush < 0 || st < 0) fail_file(display_, "write failed (disk full or file size limit?)");
}

void Hdf5Writer::ensure_parent_groups(const std::string& name) {
  std::string path;
  size_t start = 1;
  while (true) {
    size_t slash = name.find('/', start);
    if (slash == std::string::npos) break;
    path = name.substr(0, slash);
    if (H5Lexists(file_, path.c_str(), H5P_DEFAULT) <= 0) {
      Handle g(H5Gcreate2(file_, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      if (!g.ok()) fail_file(display_, "cannot create group " + path);
    }
    start = slash + 1;
  }
}

void Hdf5Writer::create_raw(const std::string& name, hid_t type, const Shape& shape, DatasetOptions opt) {
  if (file_ < 0) fail_file(display_, "file already closed");
  ensure_parent_groups(name);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (opt.chunk_rows > 0 && !dims.empty() && dims[0] > 0) {
    std::vector<hsize_t> chunk(dims);
    chunk[0] = std::min<hsize_t>(opt.chunk_rows, dims[0]);
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    if (opt.deflate > 0) H5Pset_deflate(dcpl.get(), static_cast<unsigned>(opt.deflate));
  }
  Handle ds(H5Dcreate2(file_, name.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(display_, "cannot create dataset " + name);
  if (!dims.empty() && dims[0] > 0 && row_bytes_of(type, dims) > 0)
    sums_.emplace(name, h5::DatasetChecksum(dims[0], row_bytes_of(type, dims)));
}

void Hdf5Writer::write_rows_raw(const std::string& name, hid_t type, uint64_t row0, uint64_t rows, const void* data) {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(display_, "no dataset " + name);
  Handle fspace(H5Dget_space(ds.get()));
  int rank = H5Sget_simple_extent_ndims(fspace.get());
  herr_t st;
  if (rank == 0) {
    st = H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  } else {
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
    if (row0 + rows > dims[0]) fail_file(display_, "row range past the end of " + name);
    const size_t row_bytes = row_bytes_of(type, dims);
    const auto sum = sums_.find(name);
    if (sum != sums_.end()) sum->second.wrote(row0, rows, data);
    if (write_deflated_chunks(ds.get(), type, dims, row0, rows, data, display_)) {
      start_writeback(rows * row_bytes);
      return;
    }
    // A large block goes in slices of ~64 MB, each handed to the disk as soon as it is in the
    // page cache: the disk then writes while the rest is copied, instead of after it
    // (docs/DECISIONS.md, "Large blocks are written in 64 MB slices").
    const uint64_t slice = std::max<uint64_t>(1, (uint64_t(64) << 20) / std::max<size_t>(row_bytes, 1));
    st = 0;
    for (uint64_t r = 0; r < rows && st >= 0; r += slice) {
      const uint64_t n = std::min(slice, rows - r);
      const Handle mspace = select_rows(fspace.get(), dims, row0 + r, n);
      st = H5Dwrite(ds.get(), type, mspace.get(), fspace.get(), H5P_DEFAULT,
                    static_cast<const uint8_t*>(data) + r * row_bytes);
      if (st >= 0) start_writeback(n * row_bytes);
    }
  }
  if (st < 0) fail_file(display_, "cannot write " + name + " (disk full or file size limit?)");
}

// Every output is fsync'ed before it is renamed into place (AtomicOutput::commit). Left to
// the end, that fsync waits for the whole file to reach the disk (docs/DECISIONS.md, "File
// I/O at the speed of the page cache"). Asking the kernel to start writing
// each large block back as soon as it is in the page cache overlaps the disk with the rest
// of the run. Only a hint: the commit's fsync is what guarantees the data is on disk.
void Hdf5Writer::start_writeback(size_t bytes_written) {
  constexpr size_t kMinBytes = size_t(8) << 20;  // small writes: the final fsync is quick anyway
  if (bytes_written < kMinBytes) return;
  void* handle = nullptr;
  if (H5Fget_vfd_handle(file_, H5P_DEFAULT, &handle) < 0 || handle == nullptr) return;
  // The whole file (offset 0, length 0 = to its end): already written pages are skipped.
  sync_file_range(*static_cast<int*>(handle), 0, 0, SYNC_FILE_RANGE_WRITE);
}

namespace {
hid_t open_object(hid_t file, const std::string& obj) { return H5Oopen(file, obj.c_str(), H5P_DEFAULT); }

void write_attr(hid_t file, const std::string& display, const std::string& obj, const std::string& key,
                hid_t type, hid_t space, const void* data) {
  Handle o(open_object(file, obj));
  if (!o.ok()) fail_file(display, "no object " + obj + " for attribute " + key);
  if (H5Aexists(o.get(), key.c_str()) > 0) H5Adelete(o.get(), key.c_str());
  Handle a(H5Acreate2(o.get(), key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a.ok() || H5Awrite(a.get(), type, data) < 0) fail_file(display, "cannot write attribute " + key);
}
}  // namespace

void Hdf5Writer::set_attr(const std::string& obj, const std::string& key, const std::string& value) {
  // Variable-length UTF-8 strings: what h5py reads back as `str`.
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR));
  const char* p = value.c_str();
  write_attr(file_, display_, obj, key, type.get(), space.get(), &p);
}

void Hdf5Writer::set_attr(const std::string& obj, const std::string& key, double value) {
  Handle space(H5Screate(H5S_SCALAR));
  write_attr(file_, display_, obj, key, H5T_NATIVE_DOUBLE, space.get(), &value);
}

void Hdf5Writer::set_attr(const std::string& obj, const std::string& key, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR));
  write_attr(file_, display_, obj, key, H5T_NATIVE_INT64, space.get(), &value);
}

void Hdf5Writer::set_attr(const std::string& obj, const std::string& key, const std::vector<double>& values) {
  hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  write_attr(file_, display_, obj, key, H5T_NATIVE_DOUBLE, space.get(), values.data());
}

void Hdf5Writer::set_attr(const std::string& obj, const std::string& key, const std::vector<int64_t>& values) {
  hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  write_attr(file_, display_, obj, key, H5T_NATIVE_INT64, space.get(), values.data());
}

void Hdf5Writer::set_attr(const std::string& obj, const std::string& key, const std::vector<std::string>& values) {
  Handle type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr));
  std::vector<const char*> ptrs;
  for (auto& s : values) ptrs.push_back(s.c_str());
  write_attr(file_, display_, obj, key, type.get(), space.get(), ptrs.data());
}

// ---- reader ------------------------------------------------------------------------------
Hdf5Reader::Hdf5Reader(const std::string& path) : path_(path) {
  // A FIFO or a device would block or never end; toolkit files are regular files.
  struct stat st;
  if (stat(path.c_str(), &st) != 0) fail_file(path, std::string("cannot open: ") + strerror(errno));
  if (S_ISDIR(st.st_mode)) fail_file(path, "is a folder, expected an HDF5 file");
  if (!S_ISREG(st.st_mode)) fail_file(path, "is not a regular file (a FIFO, socket or device?), expected an HDF5 file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) fail_file(path, std::string("cannot open: ") + strerror(errno));
    fclose(f);
    fail_file(path, "not an HDF5 file (or truncated/corrupted)");
  }
  probe_hdf5_metadata(path);
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) fail_file(path, "cannot open as HDF5 (truncated or corrupted?)");
  // Checked here too, not only by the probe: the probe can be off (fuzzing) or unable to
  // fork, and the library would follow an external link on the first H5Dopen.
  const std::string foreign = foreign_storage(file_);
  if (!foreign.empty()) {
    H5Fclose(file_);
    file_ = -1;
    fail_file(path, foreign);
  }
  file_bytes_ = file_size_of(path);
}

Hdf5Reader::~Hdf5Reader() {
  if (file_ >= 0) H5Fclose(file_);
}

bool Hdf5Reader::has(const std::string& name) const {
  if (name == "/") return true;
  // Check every path component so "/a/b" on a file without "/a" is false, not an error.
  size_t start = 1;
  while (true) {
    size_t slash = name.find('/', start);
    std::string part = slash == std::string::npos ? name : name.substr(0, slash);
    if (H5Lexists(file_, part.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

Shape Hdf5Reader::shape(const std::string& name) const {
  if (!has(name)) fail_file(path_, name + " is missing");
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(path_, name + " is not a dataset (corrupted file?)");
  Handle space(H5Dget_space(ds.get()));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail_file(path_, name + ": unreadable dataspace (corrupted file?)");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  Shape s(dims.begin(), dims.end());
  // Every caller may size a buffer from this shape: it must be backed by data first.
  const std::string problem = storage_problem(ds.get(), file_bytes_);
  if (!problem.empty()) fail_file(path_, name + " has shape " + shape_str(s) + " " + problem);
  return s;
}

Shape Hdf5Reader::require(const std::string& name, const Shape& expect) const {
  Shape s = shape(name);
  bool ok = s.size() == expect.size();
  for (size_t i = 0; ok && i < s.size(); ++i) ok = expect[i] == 0 || expect[i] == s[i];
  if (!ok) {
    std::string want = "[";
    for (size_t i = 0; i < expect.size(); ++i) want += (i ? "," : "") + (expect[i] ? std::to_string(expect[i]) : std::string("N"));
    fail_file(path_, name + " has shape " + shape_str(s) + ", expected " + want + "]");
  }
  return s;
}

void Hdf5Reader::check_type(const std::string& name, hid_t want, const char* want_name) const {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(path_, name + " is missing");
  Handle t(H5Dget_type(ds.get()));
  if (!same_type(t.get(), want)) fail_file(path_, name + " has dtype " + type_name(t.get()) + ", expected " + want_name);
  shape(name);  // the claimed shape is backed by stored data (read_rows does not go through shape())
}

void Hdf5Reader::check_kind(const std::string& name, hid_t want) const {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(path_, name + " is missing");
  Handle t(H5Dget_type(ds.get()));
  const H5T_class_t cls = H5Tget_class(t.get());
  if (cls != H5Tget_class(want))
    fail_file(path_, name + " has dtype " + type_name(t.get()) + ", expected " +
                         (H5Tget_class(want) == H5T_FLOAT ? "float16, float32 or float64" : "an integer type"));
  shape(name);  // the claimed shape is backed by stored data
}

bool Hdf5Reader::holds_float16(const std::string& name) const {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(path_, name + " is missing");
  Handle t(H5Dget_type(ds.get()));
  return H5Tget_class(t.get()) == H5T_FLOAT && H5Tget_size(t.get()) == 2;
}

void Hdf5Reader::read_halves(const std::string& name, uint64_t row0, uint64_t rows, Half* out) const {
  if (!holds_float16(name)) check_type(name, H5Type<Half>::id(), H5Type<Half>::name());  // says what it holds
  if (rows) read_raw(name, H5Type<Half>::id(), row0, rows, out);
}

void Hdf5Reader::read_floats(const std::string& name, uint64_t row0, uint64_t rows, float* out) const {
  if (!holds_float16(name)) return read_rows_converting<float>(name, row0, rows, out);
  check_kind(name, H5T_NATIVE_FLOAT);
  const Shape s = shape(name);
  uint64_t per_row = 1;
  for (size_t i = 1; i < s.size(); ++i) per_row *= s[i];
  if (rows == 0 || per_row == 0) return;
  if (row0 + rows > s[0]) fail_file(path_, "reading past the end of " + name);
  {  // Unchecked float16 (h5py's): read and widened in one pass, a piece per thread.
    Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
    const std::vector<hsize_t> dims(s.begin(), s.end());
    if (ds.ok() && !h5::has_checksum(ds.get()) &&
        read_contiguous_parallel(ds.get(), H5Type<Half>::id(), name, dims, row0, rows, out, /*widen_halves=*/true))
      return;
  }
  // Any other layout, and checksummed halves (checked by read_raw as stored): blocks of about
  // 32 MB of halves, each read, then widened on every core.
  const uint64_t block_rows = std::max<uint64_t>(1, (uint64_t{16} << 20) / per_row);
  LargeVector<Half> halves(static_cast<size_t>(std::min(rows, block_rows) * per_row));
  for (uint64_t r = 0; r < rows; r += block_rows) {
    const uint64_t n = std::min(block_rows, rows - r);
    read_raw(name, H5Type<Half>::id(), row0 + r, n, halves.data());
    halves_to_floats(halves.data(), out + r * per_row, static_cast<size_t>(n * per_row));
  }
}

// Unfiltered contiguous data (the features files) is a plain byte range of the file: read
// it with pread on several threads, which copies from the page cache at several times the
// one-thread rate H5Dread gets. storage_problem (via shape()) has checked that the range
// lies inside the file.
bool Hdf5Reader::read_contiguous_parallel(hid_t ds, hid_t type, const std::string& name,
                                          const std::vector<hsize_t>& dims, uint64_t row0, uint64_t rows,
                                          void* out, bool widen_halves) const {
  constexpr size_t kPiece = size_t(4) << 20;  // below two pieces H5Dread is as fast
  const size_t row_bytes = row_bytes_of(type, dims), bytes = rows * row_bytes;
  if (bytes < 2 * kPiece) return false;
  Handle dcpl(H5Dget_create_plist(ds));
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS || H5Pget_nfilters(dcpl.get()) != 0 ||
      H5Pget_external_count(dcpl.get()) != 0 || !stored_as(ds, type))
    return false;
  const haddr_t base = H5Dget_offset(ds);  // absolute, past any user block
  void* handle = nullptr;
  if (base == HADDR_UNDEF || H5Fget_vfd_handle(file_, H5P_DEFAULT, &handle) < 0 || handle == nullptr) return false;
  const int fd = *static_cast<int*>(handle);  // the sec2 driver's descriptor (read-only)
  const uint64_t start = base + row0 * row_bytes;
  if (start + bytes > file_bytes_) fail_file(path_, "cannot read " + name + " (truncated file?)");
  const int64_t pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  bool failed = false;
#pragma omp parallel
  {
    // Widening: each thread reads a piece of halves into its own buffer, then writes its floats.
    std::vector<Half> halves(widen_halves ? kPiece / sizeof(Half) : 0);
#pragma omp for schedule(dynamic, 1)
    for (int64_t p = 0; p < pieces; ++p) {
      const size_t first = static_cast<size_t>(p) * kPiece, end = std::min(bytes, first + kPiece);
      size_t done = first;
      while (done < end) {
        uint8_t* to = widen_halves ? reinterpret_cast<uint8_t*>(halves.data()) + (done - first)
                                   : static_cast<uint8_t*>(out) + done;
        const ssize_t got = pread(fd, to, end - done, static_cast<off_t>(start + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          failed = true;  // EOF or I/O error: the file shrank or the disk failed
          break;
        }
        done += static_cast<size_t>(got);
      }
      if (widen_halves && done == end)
        halves_to_floats(halves.data(), static_cast<float*>(out) + first / sizeof(Half), (end - first) / sizeof(Half));
    }
  }
  if (failed) fail_file(path_, "cannot read " + name + " (truncated file or I/O error)");
  return true;
}

void Hdf5Reader::read_raw(const std::string& name, hid_t type, uint64_t row0, uint64_t rows, void* out) const {
  Handle ds(H5Dopen2(file_, name.c_str(), H5P_DEFAULT));
  if (!ds.ok()) fail_file(path_, name + " is missing");
  Handle fspace(H5Dget_space(ds.get()));
  int rank = H5Sget_simple_extent_ndims(fspace.get());
  herr_t st;
  if (rank <= 0) {
    st = H5Dread(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out);
  } else {
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
    if (row0 + rows > dims[0]) fail_file(path_, "reading past the end of " + name);
    st = 0;
    if (!read_deflated_chunks(ds.get(), type, dims, row0, rows, out, path_, name) &&
        !read_contiguous_parallel(ds.get(), type, name, dims, row0, rows, out)) {
      const Handle mspace = select_rows(fspace.get(), dims, row0, rows);
      st = H5Dread(ds.get(), type, mspace.get(), fspace.get(), H5P_DEFAULT, out);
    }
    // What was read is what was written: the rows as read where they are the stored bytes.
    const std::string problem =
        st < 0 ? "" : h5::checksum_problem(ds.get(), row0, rows, stored_as(ds.get(), type) ? out : nullptr);
    if (!problem.empty()) fail_file(path_, name + " " + problem);
  }
  if (st < 0) fail_file(path_, "cannot read " + name + " (truncated or corrupted file?)");
}

hid_t Hdf5Reader::open_attr(const std::string& obj, const std::string& key) const {
  if (!has(obj)) fail_file(path_, obj + " is missing");
  Handle o(H5Oopen(file_, obj.c_str(), H5P_DEFAULT));
  if (!o.ok()) fail_file(path_, "cannot open " + obj + " (corrupted file?)");
  if (H5Aexists(o.get(), key.c_str()) <= 0) fail_file(path_, "attribute " + key + " is missing on " + obj);
  hid_t a = H5Aopen(o.get(), key.c_str(), H5P_DEFAULT);
  if (a < 0) fail_file(path_, "cannot open attribute " + key + " (corrupted file?)");
  return a;
}

bool Hdf5Reader::has_attr(const std::string& obj, const std::string& key) const {
  if (!has(obj)) return false;
  Handle o(H5Oopen(file_, obj.c_str(), H5P_DEFAULT));
  return o.ok() && H5Aexists(o.get(), key.c_str()) > 0;
}

std::vector<std::string> Hdf5Reader::attr_strings(const std::string& obj, const std::string& key) const {
  Handle a(open_attr(obj, key));
  Handle t(H5Aget_type(a.get()));
  if (H5Tget_class(t.get()) != H5T_STRING) fail_file(path_, "attribute " + key + " is not a string");
  Handle space(H5Aget_space(a.get()));
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || n > (1 << 20)) fail_file(path_, "attribute " + key + " has a bad size");
  std::vector<std::string> out;
  if (H5Tis_variable_str(t.get()) > 0) {
    Handle mt(H5Tcopy(H5T_C_S1));
    H5Tset_size(mt.get(), H5T_VARIABLE);
    H5Tset_cset(mt.get(), H5Tget_cset(t.get()));
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    if (H5Aread(a.get(), mt.get(), ptrs.data()) < 0) fail_file(path_, "cannot read attribute " + key);
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(mt.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    size_t size = H5Tget_size(t.get());
    std::vector<char> buf(size * static_cast<size_t>(n) + 1, 0);
    if (H5Aread(a.get(), t.get(), buf.data()) < 0) fail_file(path_, "cannot read attribute " + key);
    // Null-padded (h5py's fixed-length strings): only the trailing NULs are padding; a NUL
    // inside stays, so that a reader can refuse it instead of two names becoming one.
    const bool terminated = H5Tget_strpad(t.get()) == H5T_STR_NULLTERM;
    for (hssize_t i = 0; i < n; ++i) {
      const char* s = &buf[static_cast<size_t>(i) * size];
      size_t len = terminated ? strnlen(s, size) : size;
      while (len > 0 && s[len - 1] == '\0') --len;
      out.emplace_back(s, len);
    }
  }
  return out;
}

std::string Hdf5Reader::attr_string(const std::string& obj, const std::string& key) const {
  auto v = attr_strings(obj, key);
  if (v.size() != 1) fail_file(path_, "attribute " + key + " is not a single string");
  return v[0];
}

template <typename T>
std::vector<T> Hdf5Reader::attr_numbers(const std::string& obj, const std::string& key, bool integers_only) const {
  Handle a(open_attr(obj, key));
  Handle t(H5Aget_type(a.get()));
  const H5T_class_t cls = H5Tget_class(t.get());
  if (integers_only && cls != H5T_INTEGER) fail_file(path_, "attribute " + key + " is not an integer");
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) fail_file(path_, "attribute " + key + " is not numeric");
  Handle space(H5Aget_space(a.get()));
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || n > (1 << 24)) fail_file(path_, "attribute " + key + " has a bad size");
  std::vector<T> out(static_cast<size_t>(n));
  if (n && H5Aread(a.get(), H5Type<T>::id(), out.data()) < 0) fail_file(path_, "cannot read attribute " + key);
  return out;
}

std::vector<double> Hdf5Reader::attr_doubles(const std::string& obj, const std::string& key) const {
  return attr_numbers<double>(obj, key, false);
}

std::vector<int64_t> Hdf5Reader::attr_ints(const std::string& obj, const std::string& key) const {
  return attr_numbers<int64_t>(obj, key, true);
}

double Hdf5Reader::attr_double(const std::string& obj, const std::string& key) const {
  auto v = attr_doubles(obj, key);
  if (v.size() != 1) fail_file(path_, "attribute " + key + " is not a scalar");
  return v[0];
}

int64_t Hdf5Reader::attr_int(const std::string& obj, const std::string& key) const {
  Handle a(open_attr(obj, key));
  Handle t(H5Aget_type(a.get()));
  if (H5Tget_class(t.get()) != H5T_INTEGER) fail_file(path_, "attribute " + key + " is not an integer");
  Handle space(H5Aget_space(a.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) fail_file(path_, "attribute " + key + " is not a scalar");
  int64_t v = 0;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) fail_file(path_, "cannot read attribute " + key);
  return v;
}

namespace {
// "an ae-model", "an image-dataset", "a cifar10-dataset": the article the name is read with.
std::string a_or_an(const std::string& name) {
  return (!name.empty() && std::strchr("aeiouAEIOU", name[0]) ? "an " : "a ") + name;
}
}  // namespace

void Hdf5Reader::require_format(const std::string& format, const std::string& written_by, int max_version) const {
  if (!has_attr("/", "format"))
    fail_file(path_, "not " + a_or_an(format) + " file (no 'format' attribute)" +
                         (written_by.empty() ? "" : "; " + written_by + " writes those"));
  std::string got = attr_string("/", "format");
  if (got != format)
    fail_file(path_, "is " + a_or_an(got) + " file, expected " + format +
                         (written_by.empty() ? "" : ", which " + written_by + " writes"));
  if (has_attr("/", "format_version")) {
    int64_t v = attr_int("/", "format_version");
    if (v < 1 || v > max_version)
      fail_file(path_, "format_version " + std::to_string(v) + " is not supported (this build reads up to " + std::to_string(max_version) + ")");
  }
}

}  // namespace cae
