// The parallel deflate codec behind Hdf5Writer and Hdf5Reader (hdf5_io.h) for chunked
// datasets whose only filter is deflate (the image datasets cifar-convert writes).
//
// HDF5's own deflate filter runs zlib on the calling thread, one chunk at a time (its speed:
// docs/DECISIONS.md, "Parallel chunk compression"). Here whole
// chunks are compressed and inflated by libdeflate on every core, and moved in and out of
// the file raw (H5Dwrite_chunk / H5Dread_chunk, one HDF5 call at a time). The streams are
// zlib-format with the same chunk layout and filter mask as HDF5's own, so h5py and any
// other HDF5 reader read what this writes, and this reads what they write.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cae {

// The share of their bytes that up to `samples` pieces of `piece_bytes`, spread evenly over
// `data`, keep when deflated at `level` by the writer's compressor: whether deflate pays,
// for the price of a few pieces, not the whole array. The pieces are compressed in
// parallel; 1 for no data or no compressor.
double deflated_share(const void* data, size_t bytes, size_t piece_bytes, int level, int samples = 8);

// Rows [row0, row0 + rows) of `data` (of `type`, rows of the dataset's `dims`) written as
// whole deflated chunks. False, having written nothing, unless `ds` is chunked along its
// first axis only, deflate is its only filter and the rows start and end on chunk
// boundaries (or at the dataset's end); throws "<display>: ..." when a write fails.
bool write_deflated_chunks(hid_t ds, hid_t type, const std::vector<hsize_t>& dims, uint64_t row0, uint64_t rows,
                           const void* data, const std::string& display);

// Rows [row0, row0 + rows) of dataset `name` of `path` into `out`, as H5Dread would give
// them in `type`. False, having read nothing, unless `ds` is laid out as
// write_deflated_chunks writes and stored exactly as `type`. libdeflate checks each
// stream's Adler-32 and exact length: a damaged chunk throws "<path>: cannot read <name>:
// its compressed chunk at row R is damaged ...".
bool read_deflated_chunks(hid_t ds, hid_t type, const std::vector<hsize_t>& dims, uint64_t row0, uint64_t rows,
                          void* out, const std::string& path, const std::string& name);

}  // namespace cae
