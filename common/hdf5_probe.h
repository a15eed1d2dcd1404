// The reader sandbox. HDF5 1.10 trusts the metadata of the files it opens, and damaged
// metadata can crash it, make it allocate gigabytes or loop forever. So before Hdf5Reader
// opens a file, a forked child walks all of the file's metadata under a memory and a time
// limit; a file the child cannot walk is refused with one line naming it
// (docs/RELIABILITY.md). Raw data is not read there: zlib checks it when it is read.
#pragma once
#include <hdf5.h>

#include <string>

namespace cae {

// Throws std::runtime_error("<path>: corrupted HDF5 ...") unless the child's walk of every
// object and attribute of `path` finished cleanly. Does nothing when the probe is off, or
// when no child can be started (the file is then read unprobed).
void probe_hdf5_metadata(const std::string& path);

// Toolkit files hold all of their own data. Returns "" when they do, else what does not,
// first found: "/x is an external link to other.h5:/y" (a link into another file, or to a
// FIFO that would block the reader forever), "dataset /x keeps its data in an external
// file (raw.bin)", "dataset /x is a virtual dataset (its data is in other files)", a
// user-defined link. Nothing is followed: only the file's own link table and dataset
// creation properties are read. Both the probe's child and Hdf5Reader call it, so the
// tool never follows what the probe did not walk.
std::string foreign_storage(hid_t file);

// Fuzz targets switch the probe off to exercise the library in-process.
void set_hdf5_metadata_probe(bool enabled);

}  // namespace cae
