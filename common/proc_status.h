// What the kernel says about this process's memory in /proc/self/status. Read where a
// limit has to be set or checked against what the process maps already: the address-space
// check before OpenBLAS maps its buffers (blas_runtime) and the data limit of the HDF5
// metadata probe's child (hdf5_probe).
#pragma once
#include <cstdint>

namespace cae {

// One "Name: N kB" field of the status file (e.g. "VmSize", "VmData") in bytes; 0 when the
// file cannot be read or has no such field. `path` exists for tests (a fake file). Reads
// with stdio only: it runs before main() and inside a forked child.
uint64_t proc_status_bytes(const char* field, const char* path = "/proc/self/status");

}  // namespace cae
