// The reader sandbox. HDF5 1.10 trusts the metadata of the files it opens, and damaged
// metadata can crash it, make it allocate gigabytes or loop forever. So before Hdf5Reader
// opens a file, a forked child walks all of the file's metadata under a memory and a time
// limit; a file the child cannot walk is refused with one line naming it
// (docs/RELIABILITY.md). Raw data is not read there: zlib checks it when it is read.
#pragma once
#include <string>

namespace cae {

// Throws std::runtime_error("<path>: corrupted HDF5 ...") unless the child's walk of every
// object and attribute of `path` finished cleanly. Does nothing when the probe is off, or
// when no child can be started (the file is then read unprobed).
void probe_hdf5_metadata(const std::string& path);

// Fuzz targets switch the probe off to exercise the library in-process.
void set_hdf5_metadata_probe(bool enabled);

}  // namespace cae
