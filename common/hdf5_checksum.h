// Content checksums of the datasets the toolkit writes (Hdf5Writer) and their check on
// every read (Hdf5Reader).
//
// The toolkit's large datasets are stored uncompressed (CIFAR's photos, the features), and
// HDF5 checks nothing in raw data: bytes overwritten on disk or in a copy would be read as
// images or features and give a wrong result with exit 0. So every dataset of rank >= 1 the
// writer stores carries the CRC-32 of each block of its rows, computed from the rows as they
// are written, and a read checks the blocks it touches; a block that does not match is one
// line naming the file, the dataset and the rows. Blocks rather than one sum per dataset, so
// that a read of some rows (ae-encode streams the images) checks them without reading the
// rest. CRC-32 by libdeflate (carry-less multiply: 4.5 GB/s a core on this 2-core machine,
// against SHA-256's 0.6 GB/s; HDF5's Fletcher-32 filter would need chunked storage, and its
// one-thread H5Dread ran at 1.3 GB/s against 5.6 GB/s unfiltered, docs/RELIABILITY.md).
//   attribute crc32       uint32 [B]  block b: rows [b*R, min((b+1)*R, N)) as stored
//   attribute crc32_rows  int64       R, a power of two: blocks of ~1 MiB, at most 4,096
// A dataset without them (written by h5py, or by the toolkit before they existed) is read
// unchecked, as such files always were.
#pragma once
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cae::h5 {

inline constexpr const char* kCrcAttr = "crc32";
inline constexpr const char* kCrcRowsAttr = "crc32_rows";

// Rows per checksum block of a dataset of `rows` rows of `row_bytes` bytes: the largest
// power of two whose block fits in 1 MiB (at least 1), doubled until there are at most
// 4,096 blocks (the checksums stay a 16 KB attribute, inside HDF5's 64 KB limit).
uint64_t checksum_block_rows(uint64_t rows, size_t row_bytes);

// The checksums of one dataset while it is written, by row ranges in any order.
class DatasetChecksum {
 public:
  DatasetChecksum(uint64_t rows, size_t row_bytes);
  // Rows [row0, row0 + rows) of `data` were written: the blocks they cover wholly take
  // their CRC from `data`, on every core; a block covered in part is left to store().
  void wrote(uint64_t row0, uint64_t rows, const void* data);
  // Reads back from `ds` the blocks no single write covered (rows written in pieces), then
  // stores the attributes on `ds`. A dataset with a block no write touched gets none: that
  // block holds HDF5's fill value, perhaps never allocated (a dataset of terabytes created
  // and left hollow), and reading it back would protect nothing that was written. False
  // when HDF5 fails.
  bool store(hid_t ds) const;

 private:
  uint64_t rows_, block_rows_;
  size_t row_bytes_;
  std::vector<uint32_t> crc_;
  std::vector<uint8_t> known_;    // 1: crc_ holds the block as last written whole
  std::vector<uint8_t> touched_;  // 1: some write reached the block
};

// True when `ds` carries the checksum attributes.
bool has_checksum(hid_t ds);

// Checks rows [row0, row0 + rows) of `ds` against its checksum, if it has one. `read`: those
// rows as just read when they are the stored bytes (read in the stored type), else null;
// blocks that reach outside the rows, or all of them without `read`, are read again from
// `ds`. Returns "" when they match (or there is no checksum), else the problem:
// "rows 256 to 511 do not match their checksum (the file changed after it was written)".
std::string checksum_problem(hid_t ds, uint64_t row0, uint64_t rows, const void* read);

}  // namespace cae::h5
