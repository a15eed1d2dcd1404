#include "common/deflate_chunks.h"

#include <libdeflate.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/hdf5_handle.h"
#include "common/memory_limit.h"

namespace cae {

using h5::Handle;
using h5::row_bytes_of;
using h5::stored_as;

namespace {

// Deflate level of a chunked dataset whose only filter is deflate; -1 otherwise.
int deflate_only_level(hid_t ds, std::vector<hsize_t>& chunk, int rank) {
  Handle dcpl(H5Dget_create_plist(ds));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED || H5Pget_nfilters(dcpl.get()) != 1) return -1;
  unsigned flags = 0, cd[4] = {0};
  size_t ncd = 4;
  if (H5Pget_filter2(dcpl.get(), 0, &flags, &ncd, cd, 0, nullptr, nullptr) != H5Z_FILTER_DEFLATE) return -1;
  chunk.resize(static_cast<size_t>(rank));
  H5Pget_chunk(dcpl.get(), rank, chunk.data());
  return ncd > 0 ? static_cast<int>(cd[0]) : 6;
}

}  // namespace

double deflated_share(const void* data, size_t bytes, size_t piece_bytes, int level, int samples) {
  if (bytes == 0 || piece_bytes == 0 || samples < 1) return 1.0;
  piece_bytes = std::min(piece_bytes, bytes);
  const size_t pieces = bytes / piece_bytes;  // whole pieces; the sample's first one starts at 0
  const int n = static_cast<int>(std::min<size_t>(static_cast<size_t>(samples), pieces));
  size_t packed = 0;
  bool failed = false;
#pragma omp parallel reduction(+ : packed)
  {
    libdeflate_compressor* comp = libdeflate_alloc_compressor(std::clamp(level, 1, 12));
    std::vector<uint8_t> out(comp ? libdeflate_zlib_compress_bound(comp, piece_bytes) : 0);
#pragma omp for schedule(dynamic, 1)
    for (int k = 0; k < n; ++k) {
      const uint8_t* piece = static_cast<const uint8_t*>(data) + static_cast<size_t>(k) * pieces / n * piece_bytes;
      const size_t len = comp ? libdeflate_zlib_compress(comp, piece, piece_bytes, out.data(), out.size()) : 0;
      if (len == 0) {
#pragma omp atomic write
        failed = true;
      }
      packed += len;
    }
    libdeflate_free_compressor(comp);
  }
  if (failed) return 1.0;  // no compressor (out of memory): as if nothing shrank
  return static_cast<double>(packed) / static_cast<double>(static_cast<size_t>(n) * piece_bytes);
}

// HDF5's own deflate runs on one core with zlib. Whole chunks are instead compressed in
// parallel with libdeflate (zlib-format streams, so any HDF5 reader decodes them) and stored
// with H5Dwrite_chunk (docs/DECISIONS.md, "Parallel chunk compression").
bool write_deflated_chunks(hid_t ds, hid_t type, const std::vector<hsize_t>& dims, uint64_t row0, uint64_t rows,
                           const void* data, const std::string& display) {
  std::vector<hsize_t> chunk;
  int level = deflate_only_level(ds, chunk, static_cast<int>(dims.size()));
  if (level < 0) return false;
  for (size_t d = 1; d < dims.size(); ++d)
    if (chunk[d] != dims[d]) return false;  // only chunks that span whole rows
  uint64_t crows = chunk[0];
  if (row0 % crows != 0 || (rows % crows != 0 && row0 + rows != dims[0])) return false;
  size_t row_bytes = H5Tget_size(type);
  for (size_t d = 1; d < dims.size(); ++d) row_bytes *= dims[d];
  size_t chunk_bytes = row_bytes * crows;
  int64_t nchunks = static_cast<int64_t>((rows + crows - 1) / crows);
  bool failed = false;
#pragma omp parallel
  {
    // Debian's HDF5 is thread-safe, so its error stack (and whether it prints) is per
    // thread: silence it here too, or a failed write (disk full) dumps ~70 lines.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    libdeflate_compressor* comp = libdeflate_alloc_compressor(std::clamp(level, 1, 12));
    std::vector<uint8_t> in(chunk_bytes), out(libdeflate_zlib_compress_bound(comp, chunk_bytes));
#pragma omp for schedule(dynamic, 1) ordered
    for (int64_t c = 0; c < nchunks; ++c) {
      uint64_t r = static_cast<uint64_t>(c) * crows;
      uint64_t n = std::min<uint64_t>(crows, rows - r);
      const uint8_t* src = static_cast<const uint8_t*>(data) + r * row_bytes;
      if (n < crows) {  // the edge chunk is stored full-size, zero padded
        std::fill(in.begin(), in.end(), 0);
        memcpy(in.data(), src, n * row_bytes);
        src = in.data();
      }
      size_t len = libdeflate_zlib_compress(comp, src, chunk_bytes, out.data(), out.size());
#pragma omp ordered
      {
        std::vector<hsize_t> offset(dims.size(), 0);
        offset[0] = row0 + r;
        if (len == 0 || H5Dwrite_chunk(ds, H5P_DEFAULT, 0, offset.data(), len, out.data()) < 0) failed = true;
      }
    }
    libdeflate_free_compressor(comp);
  }
  if (failed) fail_file(display, "cannot write compressed chunks (disk full or file size limit?)");
  return true;
}

// The mirror of write_deflated_chunks: HDF5 inflates chunks one at a time with zlib on the
// calling thread (docs/DECISIONS.md, "Parallel chunk compression"). Here the chunks are fetched with
// H5Dread_chunk (serialised: one HDF5 call at a time) and inflated with libdeflate on every
// core, straight into `out` where a chunk lies wholly inside the rows asked for. libdeflate
// checks each stream's Adler-32 and exact length, so a damaged chunk is an error naming its
// first row, as H5Dread's would be.
bool read_deflated_chunks(hid_t ds, hid_t type, const std::vector<hsize_t>& dims, uint64_t row0, uint64_t rows,
                          void* out, const std::string& path, const std::string& name) {
  std::vector<hsize_t> chunk;
  if (deflate_only_level(ds, chunk, static_cast<int>(dims.size())) < 0 || !stored_as(ds, type)) return false;
  for (size_t d = 1; d < dims.size(); ++d)
    if (chunk[d] != dims[d]) return false;  // only chunks that span whole rows
  const uint64_t crows = chunk[0];
  if (crows == 0) return false;
  {  // edge chunks stored unfiltered would not carry that in their filter mask
    Handle dcpl(H5Dget_create_plist(ds));
    unsigned opts = 0;
    if (H5Pget_chunk_opts(dcpl.get(), &opts) < 0 || (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)) return false;
  }
  const size_t row_bytes = row_bytes_of(type, dims), chunk_bytes = row_bytes * crows;
  // zlib's stored blocks grow incompressible data by 5 bytes per 64 KB; anything much
  // larger is not a deflate stream of this chunk (and must not size a buffer).
  const hsize_t max_stored = chunk_bytes + chunk_bytes / 64 + 4096;
  // Each thread holds a chunk's stream and, where the rows end inside it, the whole chunk:
  // a chunk declared far larger than the rows asked for must not size those buffers.
  if (chunk_bytes >= (size_t(64) << 20))
    require_memory(path, name + "'s chunks of " + std::to_string(crows) + " rows",
                   saturating_product(chunk_bytes, 2 * static_cast<uint64_t>(omp_get_max_threads())));
  const int64_t first = static_cast<int64_t>(row0 / crows), last = static_cast<int64_t>((row0 + rows - 1) / crows);
  int64_t bad = -1;  // the first damaged chunk
#pragma omp parallel if (last > first)
  {
    // Per thread (Debian's HDF5 is thread-safe: its error stack is per thread); inside the
    // critical section like every HDF5 call of these workers.
#pragma omp critical(cae_hdf5_read_chunk)
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    libdeflate_decompressor* inflater = libdeflate_alloc_decompressor();
    std::vector<uint8_t> packed, scratch;
    std::vector<hsize_t> offset(dims.size(), 0);
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = first; c <= last; ++c) {
      const uint64_t c_row0 = static_cast<uint64_t>(c) * crows;
      const uint64_t lo = std::max(row0, c_row0), hi = std::min(row0 + rows, c_row0 + crows);
      uint8_t* dst = static_cast<uint8_t*>(out) + (lo - row0) * row_bytes;
      const bool whole = lo == c_row0 && hi == c_row0 + crows;  // never the zero-padded edge chunk
      hsize_t stored = 0;
      uint32_t skipped = 0;  // filter mask: bit 0 set = this chunk was stored without deflate
      bool ok = inflater != nullptr;
#pragma omp critical(cae_hdf5_read_chunk)
      {
        offset[0] = c_row0;
        ok = ok && H5Dget_chunk_storage_size(ds, offset.data(), &stored) >= 0 && stored > 0 && stored <= max_stored;
        if (ok) {
          packed.resize(stored);
          ok = H5Dread_chunk(ds, H5P_DEFAULT, offset.data(), &skipped, packed.data()) >= 0;
        }
      }
      uint8_t* target = dst;
      if (ok && !whole) {
        scratch.resize(chunk_bytes);
        target = scratch.data();
      }
      if (ok && skipped == 0)
        ok = libdeflate_zlib_decompress(inflater, packed.data(), stored, target, chunk_bytes, nullptr) ==
             LIBDEFLATE_SUCCESS;
      else if (ok && skipped == 1 && stored == chunk_bytes)  // deflate was skipped: the bytes as they are
        memcpy(target, packed.data(), chunk_bytes);
      else
        ok = false;
      if (ok && !whole) memcpy(dst, scratch.data() + (lo - c_row0) * row_bytes, (hi - lo) * row_bytes);
      if (!ok) {
#pragma omp critical(cae_hdf5_read_bad)
        if (bad < 0 || c < bad) bad = c;
      }
    }
    libdeflate_free_decompressor(inflater);
  }
  if (bad >= 0)
    fail_file(path, "cannot read " + name + ": its compressed chunk at row " + std::to_string(bad * crows) +
                         " is damaged (truncated or corrupted file?)");
  return true;
}

}  // namespace cae
