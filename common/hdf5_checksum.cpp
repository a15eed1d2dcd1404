#include "common/hdf5_checksum.h"

#include <libdeflate.h>

#include <algorithm>

#include "common/hdf5_handle.h"

namespace cae::h5 {
namespace {

constexpr size_t kBlockBytes = size_t(1) << 20;
constexpr uint64_t kMaxBlocks = 4096;

uint64_t blocks_of(uint64_t rows, uint64_t block_rows) { return (rows + block_rows - 1) / block_rows; }

// CRC-32 of each block in [first, first + count) whose rows lie in `data` (rows from row0),
// on every core: crc[b] for block b.
void crc_blocks(const uint8_t* data, uint64_t row0, uint64_t first, uint64_t count, uint64_t block_rows,
                uint64_t rows, size_t row_bytes, uint32_t* crc) {
#pragma omp parallel for schedule(dynamic, 1) if (count > 1)
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) {
    const uint64_t b = first + static_cast<uint64_t>(i), r = b * block_rows;
    const uint64_t n = std::min(block_rows, rows - r);
    crc[i] = libdeflate_crc32(0, data + (r - row0) * row_bytes, n * row_bytes);
  }
}

// The stored bytes of rows [row0, row0 + rows) of `ds` (read in its own type: no conversion).
bool read_stored(hid_t ds, uint64_t row0, uint64_t rows, std::vector<uint8_t>& out) {
  Handle type(H5Dget_type(ds)), fspace(H5Dget_space(ds));
  const int rank = H5Sget_simple_extent_ndims(fspace.get());
  if (!type.ok() || rank < 1) return false;
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
  out.resize(rows * row_bytes_of(type.get(), dims));
  const Handle mspace = select_rows(fspace.get(), dims, row0, rows);
  return H5Dread(ds, type.get(), mspace.get(), fspace.get(), H5P_DEFAULT, out.data()) >= 0;
}

}  // namespace

uint64_t checksum_block_rows(uint64_t rows, size_t row_bytes) {
  uint64_t r = 1;
  while (r * 2 * row_bytes <= kBlockBytes) r *= 2;
  while (blocks_of(rows, r) > kMaxBlocks) r *= 2;
  return r;
}

DatasetChecksum::DatasetChecksum(uint64_t rows, size_t row_bytes)
    : rows_(rows), block_rows_(checksum_block_rows(rows, row_bytes)), row_bytes_(row_bytes),
      crc_(blocks_of(rows, block_rows_), 0), known_(crc_.size(), 0), touched_(crc_.size(), 0) {}

void DatasetChecksum::wrote(uint64_t row0, uint64_t rows, const void* data) {
  if (rows == 0) return;
  const uint64_t end = row0 + rows;
  for (uint64_t b = row0 / block_rows_; b <= (end - 1) / block_rows_ && b < touched_.size(); ++b) touched_[b] = 1;
  const uint64_t first = blocks_of(row0, block_rows_);  // the first block starting at or after row0
  uint64_t last = end / block_rows_;                    // one past the last block ending by `end`
  if (end == rows_) last = crc_.size();                 // the short last block ends at the dataset's end
  // Blocks written in part: what the file holds there is read back by store().
  for (uint64_t b = row0 / block_rows_; b < std::min<uint64_t>(first, crc_.size()); ++b) known_[b] = 0;
  for (uint64_t b = std::max(first, last); b <= (end - 1) / block_rows_; ++b) known_[b] = 0;
  if (last <= first) return;
  crc_blocks(static_cast<const uint8_t*>(data), row0, first, last - first, block_rows_, rows_, row_bytes_,
             crc_.data() + first);
  std::fill(known_.begin() + static_cast<int64_t>(first), known_.begin() + static_cast<int64_t>(last), 1);
}

bool DatasetChecksum::store(hid_t ds) const {
  if (std::find(touched_.begin(), touched_.end(), 0) != touched_.end()) return true;  // not wholly written
  std::vector<uint32_t> crc(crc_);
  std::vector<uint8_t> block;
  for (size_t b = 0; b < crc.size(); ++b) {
    if (known_[b]) continue;
    const uint64_t r = b * block_rows_, n = std::min(block_rows_, rows_ - r);
    if (!read_stored(ds, r, n, block)) return false;
    crc[b] = libdeflate_crc32(0, block.data(), block.size());
  }
  const hsize_t count = crc.size();
  const int64_t block_rows = static_cast<int64_t>(block_rows_);
  Handle list(H5Screate_simple(1, &count, nullptr)), scalar(H5Screate(H5S_SCALAR));
  Handle a(H5Acreate2(ds, kCrcAttr, H5T_STD_U32LE, list.get(), H5P_DEFAULT, H5P_DEFAULT));
  Handle r(H5Acreate2(ds, kCrcRowsAttr, H5T_STD_I64LE, scalar.get(), H5P_DEFAULT, H5P_DEFAULT));
  return a.ok() && r.ok() && H5Awrite(a.get(), H5T_NATIVE_UINT32, crc.data()) >= 0 &&
         H5Awrite(r.get(), H5T_NATIVE_INT64, &block_rows) >= 0;
}

bool has_checksum(hid_t ds) { return H5Aexists(ds, kCrcAttr) > 0 && H5Aexists(ds, kCrcRowsAttr) > 0; }

std::string checksum_problem(hid_t ds, uint64_t row0, uint64_t rows, const void* read) {
  if (rows == 0 || !has_checksum(ds)) return "";
  Handle type(H5Dget_type(ds)), space(H5Dget_space(ds));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (!type.ok() || rank < 1) return "";  // a scalar has no rows to check
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  const size_t row_bytes = row_bytes_of(type.get(), dims);
  const uint64_t n_rows = dims[0];
  const std::string damaged = "has a damaged checksum attribute (" + std::string(kCrcAttr) + ", " + kCrcRowsAttr + ")";
  int64_t block_rows = 0;
  {
    Handle r(H5Aopen(ds, kCrcRowsAttr, H5P_DEFAULT)), rs(H5Aget_space(r.get())), rt(H5Aget_type(r.get()));
    if (H5Tget_class(rt.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(rs.get()) != 1 ||
        H5Aread(r.get(), H5T_NATIVE_INT64, &block_rows) < 0 || block_rows < 1)
      return damaged;
  }
  const uint64_t n_blocks = blocks_of(n_rows, static_cast<uint64_t>(block_rows));
  std::vector<uint32_t> want(n_blocks);
  {
    Handle a(H5Aopen(ds, kCrcAttr, H5P_DEFAULT)), as(H5Aget_space(a.get())), at(H5Aget_type(a.get()));
    if (H5Tget_class(at.get()) != H5T_INTEGER || H5Sget_simple_extent_npoints(as.get()) != hssize_t(n_blocks) ||
        H5Aread(a.get(), H5T_NATIVE_UINT32, want.data()) < 0)
      return damaged;
  }
  const uint64_t br = static_cast<uint64_t>(block_rows), end = row0 + rows;
  const uint64_t lo = row0 / br, hi = (end - 1) / br;  // the blocks the rows touch
  std::vector<uint32_t> got(hi - lo + 1, 0);
  std::vector<uint8_t> block;
  auto inside = [&](uint64_t b) { return read && b * br >= row0 && std::min(n_rows, (b + 1) * br) <= end; };
  // The blocks wholly inside a read, from what was read; the (at most two) others again.
  uint64_t first = lo;
  while (first <= hi && !inside(first)) ++first;
  uint64_t last = first;
  while (last <= hi && inside(last)) ++last;
  if (last > first)
    crc_blocks(static_cast<const uint8_t*>(read), row0, first, last - first, br, n_rows, row_bytes,
               got.data() + (first - lo));
  for (uint64_t b = lo; b <= hi; ++b) {
    if (b >= first && b < last) continue;
    const uint64_t r = b * br;
    if (!read_stored(ds, r, std::min(br, n_rows - r), block)) return "cannot be read (truncated or corrupted file?)";
    got[b - lo] = libdeflate_crc32(0, block.data(), block.size());
  }
  for (uint64_t b = lo; b <= hi; ++b)
    if (got[b - lo] != want[b])
      return "rows " + std::to_string(b * br) + " to " + std::to_string(std::min(n_rows, (b + 1) * br) - 1) +
             " do not match their checksum (the file changed after it was written: damaged on disk or in a copy)";
  return "";
}

}  // namespace cae::h5
