// Unit tests of the block checksums every dataset the toolkit writes carries
// (common/hdf5_checksum.h): written from rows in any order, checked by every read, one
// error naming the file, the dataset and the rows when a stored byte changed.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/half.h"
#include "common/hdf5_checksum.h"
#include "common/hdf5_io.h"
#include "tests/support/random_values.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;
using cae_test::random_values;

// The file offset of the byte `byte` of dataset `name`'s contiguous data.
uint64_t data_offset(const std::string& path, const std::string& name, uint64_t byte) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  const haddr_t at = H5Dget_offset(ds);
  H5Dclose(ds);
  H5Fclose(f);
  if (at == HADDR_UNDEF) throw std::runtime_error(name + " has no contiguous data");
  return at + byte;
}

void flip_byte(const std::string& path, uint64_t offset) {
  FILE* fp = fopen(path.c_str(), "r+b");
  ASSERT_NE(fp, nullptr);
  fseek(fp, static_cast<long>(offset), SEEK_SET);
  const int byte = fgetc(fp);
  fseek(fp, static_cast<long>(offset), SEEK_SET);
  fputc(byte ^ 0x01, fp);
  fclose(fp);
}

// The message of what `read` throws; "" when it throws nothing.
template <typename F>
std::string error_of(F read) {
  try {
    read();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Hdf5Checksum, BlocksAreAboutAMebibyteAPowerOfTwoAndAtMost4096) {
  EXPECT_EQ(cae::h5::checksum_block_rows(50000, 3072), 256u);     // CIFAR images: 768 KB
  EXPECT_EQ(cae::h5::checksum_block_rows(60000, 16384), 64u);     // float16 features of 8,192
  EXPECT_EQ(cae::h5::checksum_block_rows(10, 1), 1u << 20);       // one block
  EXPECT_EQ(cae::h5::checksum_block_rows(3, uint64_t(4) << 20), 1u);  // a row above 1 MiB
  const uint64_t many = uint64_t(1) << 24;  // 16 M rows of 16 KB: blocks doubled to 4,096
  const uint64_t r = cae::h5::checksum_block_rows(many, 16384);
  EXPECT_EQ(r, 4096u);
  EXPECT_LE((many + r - 1) / r, 4096u);
}

TEST(Hdf5Checksum, RowsWrittenInAnyOrderAndInPiecesReadBackChecked) {
  TempDir tmp;
  const std::string path = tmp.file("x.h5");
  const uint64_t n = 1000, cols = 777;  // 1,349 rows a block: a short last block
  const std::vector<float> v = random_values<float>(n * cols, -50, 50, 1);
  {
    cae::Hdf5Writer w(path);
    w.create<float>("/x", {n, cols});
    // Out of order, blocks cut by writes, and rows 900..949 never written (their fill, 0).
    for (auto [row0, rows] : {std::pair<uint64_t, uint64_t>{500, 400}, {0, 3}, {3, 497}, {950, 50}})
      w.write_rows<float>("/x", row0, rows, v.data() + row0 * cols);
    w.write("/y", v.data(), {n, cols}, {64, 1});  // deflated chunks
    w.close();
  }
  std::vector<float> want(v);
  std::fill(want.begin() + 900 * cols, want.begin() + 950 * cols, 0.0f);
  cae::Hdf5Reader r(path);
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), ds = H5Dopen2(f, "/x", H5P_DEFAULT);
    EXPECT_TRUE(cae::h5::has_checksum(ds));
    H5Dclose(ds);
    H5Fclose(f);
  }
  EXPECT_EQ(r.read<float>("/x", {n, cols}), want);
  EXPECT_EQ(r.read<float>("/y", {n, cols}), v);
  for (auto [row0, rows] : {std::pair<uint64_t, uint64_t>{30, 671}, {999, 1}, {0, 1}}) {
    std::vector<float> part(rows * cols);
    r.read_rows<float>("/x", row0, rows, part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), want.begin() + static_cast<long>(row0 * cols)));
    std::vector<double> wide(rows * cols);  // converted by HDF5: the blocks are read again as stored
    r.read_rows_converting<double>("/x", row0, rows, wide.data());
    EXPECT_EQ(wide[0], double(want[row0 * cols]));
  }
}

TEST(Hdf5Checksum, AFlippedByteIsOneErrorNamingTheFileTheDatasetAndTheRows) {
  TempDir tmp;
  const std::string path = tmp.file("images.h5");
  const uint64_t n = 2000, row = 3072;  // blocks of 256 rows
  const std::vector<uint8_t> images = random_values<uint8_t>(n * row, 1, 255, 2);
  {
    cae::Hdf5Writer w(path);
    w.write("/train/images", images.data(), {n, row});
    w.close();
  }
  flip_byte(path, data_offset(path, "/train/images", 600 * row + 17));  // row 600: block 2
  cae::Hdf5Reader r(path);
  const std::string msg = error_of([&] { r.read<uint8_t>("/train/images"); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/train/images rows 512 to 767 do not match their checksum"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  std::vector<uint8_t> part(2000 * row);
  // A read that ends or starts inside the damaged block checks the whole block.
  EXPECT_NE(error_of([&] { r.read_rows<uint8_t>("/train/images", 500, 101, part.data()); }), "");
  EXPECT_NE(error_of([&] { r.read_rows<uint8_t>("/train/images", 700, 1, part.data()); }), "");
  std::vector<int64_t> wide(row);
  EXPECT_NE(error_of([&] { r.read_rows_converting<int64_t>("/train/images", 600, 1, wide.data()); }), "")
      << "a converting read is checked too";
  // Rows of other blocks still read, as written.
  EXPECT_EQ(error_of([&] { r.read_rows<uint8_t>("/train/images", 0, 512, part.data()); }), "");
  EXPECT_TRUE(std::equal(part.begin(), part.begin() + 512 * row, images.begin()));
  EXPECT_EQ(error_of([&] { r.read_rows<uint8_t>("/train/images", 768, 1232, part.data()); }), "");
}

TEST(Hdf5Checksum, Float16FeaturesReadAsFloatsAreChecked) {
  TempDir tmp;
  const std::string path = tmp.file("features.h5");
  const uint64_t n = 1024, dim = 8192;  // 16 MB of halves: the parallel read's size
  const std::vector<float> f = random_values<float>(n * dim, -300, 300, 3);
  std::vector<cae::Half> h(f.size());
  cae::floats_to_halves(f.data(), h.data(), f.size());
  {
    cae::Hdf5Writer w(path);
    w.write("/train/features", h.data(), {n, dim});
    w.close();
  }
  std::vector<float> got(n * dim);
  cae::Hdf5Reader(path).read_floats("/train/features", 0, n, got.data());
  EXPECT_EQ(got, f);  // small integers: exact in float16
  flip_byte(path, data_offset(path, "/train/features", (1000 * dim + 5) * 2));
  cae::Hdf5Reader r(path);
  const std::string msg = error_of([&] { r.read_floats("/train/features", 0, n, got.data()); });
  EXPECT_NE(msg.find("/train/features rows 960 to 1023 do not match their checksum"), std::string::npos) << msg;
  std::vector<cae::Half> halves(n * dim);
  EXPECT_NE(error_of([&] { r.read_halves("/train/features", 0, n, halves.data()); }), "");
}

TEST(Hdf5Checksum, ADatasetWithoutAChecksumReadsUnchecked) {
  TempDir tmp;
  const std::string path = tmp.file("plain.h5");
  const std::vector<int32_t> v = random_values<int32_t>(4096, 1, 1000, 4);
  {  // as h5py writes: no checksum attributes
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[1] = {v.size()};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t ds = H5Dcreate2(f, "/v", H5T_NATIVE_INT32, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    EXPECT_FALSE(cae::h5::has_checksum(ds));
    H5Dclose(ds);
    H5Sclose(space);
    H5Fclose(f);
  }
  EXPECT_EQ(cae::Hdf5Reader(path).read<int32_t>("/v"), v);
}

TEST(Hdf5Checksum, ADamagedChecksumAttributeIsNamed) {
  TempDir tmp;
  const std::string path = tmp.file("x.h5");
  const std::vector<int64_t> v = random_values<int64_t>(300, 1, 9, 5);
  {
    cae::Hdf5Writer w(path);
    w.write("/v", v);
    w.close();
  }
  {  // a block of no rows
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), ds = H5Dopen2(f, "/v", H5P_DEFAULT);
    hid_t a = H5Aopen(ds, cae::h5::kCrcRowsAttr, H5P_DEFAULT);
    const int64_t zero = 0;
    ASSERT_GE(H5Awrite(a, H5T_NATIVE_INT64, &zero), 0);
    H5Aclose(a);
    H5Dclose(ds);
    H5Fclose(f);
  }
  const std::string msg = error_of([&] { cae::Hdf5Reader(path).read<int64_t>("/v"); });
  EXPECT_NE(msg.find("/v has a damaged checksum attribute"), std::string::npos) << msg;
}

}  // namespace
