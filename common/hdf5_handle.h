// An HDF5 identifier (file, dataset, dataspace, type, attribute, property list) that is
// released when it leaves scope, and the helpers for a dataset's rows. Shared by the
// reader/writer (hdf5_io.cpp), its chunk codec (deflate_chunks.cpp), the checksums
// (hdf5_checksum.cpp) and the metadata probe (hdf5_probe.cpp); not part of the toolkit's API.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cae::h5 {

class Handle {
 public:
  explicit Handle(hid_t id = -1) : id_(id) {}
  ~Handle() {
    if (id_ >= 0) H5Idec_ref(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
};

// Bytes of one row (all axes but the first) of `type`.
inline size_t row_bytes_of(hid_t type, const std::vector<hsize_t>& dims) {
  size_t bytes = H5Tget_size(type);
  for (size_t d = 1; d < dims.size(); ++d) bytes *= dims[d];
  return bytes;
}

// Selects rows [row0, row0 + rows) of `fspace`, a dataspace of `dims` (every other axis
// whole), and returns the dataspace of that block in memory.
inline Handle select_rows(hid_t fspace, const std::vector<hsize_t>& dims, uint64_t row0, uint64_t rows) {
  std::vector<hsize_t> start(dims.size(), 0), count(dims);
  start[0] = row0;
  count[0] = rows;
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  return Handle(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr));
}

// True when the stored bytes are exactly what H5Dread would hand back in `mem_type` (same
// class, size, sign and byte order): only then may a fast path copy them as they are.
inline bool stored_as(hid_t ds, hid_t mem_type) {
  Handle t(H5Dget_type(ds));
  return t.ok() && H5Tequal(t.get(), mem_type) > 0;
}

}  // namespace cae::h5
