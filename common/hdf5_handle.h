// An HDF5 identifier (file, dataset, dataspace, type, attribute, property list) that is
// released when it leaves scope. Shared by the reader/writer (hdf5_io.cpp) and the metadata
// probe (hdf5_probe.cpp); not part of the toolkit's API.
#pragma once
#include <hdf5.h>

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

}  // namespace cae::h5
