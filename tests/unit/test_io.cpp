// Unit tests of the HDF5 reader's fast paths (issue 17): deflate chunks inflated in
// parallel with libdeflate, unfiltered contiguous data read with parallel pread, and the
// plain H5Dread for every layout they do not handle.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "common/dataset.h"
#include "common/hdf5_io.h"
#include "common/provenance.h"
#include "kernels/ae/features_file.h"
#include "kernels/ae/features_reader.h"
#include "tests/support/random_values.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;
using cae_test::random_values;

// A raw-API dataset [rows, cols] of `file_type` holding `values` (converted from float).
void write_raw_dataset(const std::string& path, hid_t file_type, hid_t dcpl, hsize_t rows, hsize_t cols,
                       const std::vector<float>& values, hsize_t userblock = 0) {
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (userblock) H5Pset_userblock(fcpl, userblock);
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  hsize_t dims[2] = {rows, cols};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t ds = H5Dcreate2(f, "/x", file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), 0);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
  H5Pclose(fcpl);
}

TEST(Hdf5FastRead, DeflateChunksRoundTripWithAPartialLastChunk) {
  TempDir tmp;
  const std::string path = tmp.path + "/d.h5";
  const uint64_t n = 1000, chunk = 64;  // 15 whole chunks and one of 40 rows
  const std::vector<uint8_t> images = random_values<uint8_t>(n * 3 * 5 * 7, 1, 6, 1);
  const std::vector<float> feats = random_values<float>(n * 33, 1, 9, 2);
  {
    cae::Hdf5Writer w(path);
    w.write("/images", images.data(), {n, 3, 5, 7}, {chunk, 1});  // libdeflate, whole chunks
    // Rows written in blocks that do not start on a chunk: HDF5's own zlib compresses them.
    w.create<float>("/feats", {n, 33}, {chunk, 6});
    w.write_rows<float>("/feats", 0, 37, feats.data());
    w.write_rows<float>("/feats", 37, n - 37, feats.data() + 37 * 33);
    w.close();
  }
  cae::Hdf5Reader r(path);
  EXPECT_EQ(r.read<uint8_t>("/images", {n, 3, 5, 7}), images);
  EXPECT_EQ(r.read<float>("/feats", {n, 33}), feats);
  // Row ranges that start and end inside chunks, one inside the partial last chunk.
  for (auto [row0, rows] : {std::pair<uint64_t, uint64_t>{30, 671}, {64, 64}, {965, 30}, {999, 1}, {0, 1}}) {
    std::vector<uint8_t> part(rows * 105);
    r.read_rows<uint8_t>("/images", row0, rows, part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), images.begin() + static_cast<long>(row0 * 105)))
        << "rows " << row0 << "+" << rows;
    std::vector<float> fpart(rows * 33);
    r.read_rows<float>("/feats", row0, rows, fpart.data());
    EXPECT_TRUE(std::equal(fpart.begin(), fpart.end(), feats.begin() + static_cast<long>(row0 * 33)))
        << "rows " << row0 << "+" << rows;
  }
}

TEST(Hdf5FastRead, DamagedDeflateChunkIsOneErrorNamingTheFile) {
  TempDir tmp;
  const std::string path = tmp.path + "/damaged.h5";
  const uint64_t n = 512, chunk = 64;
  const std::vector<uint8_t> images = random_values<uint8_t>(n * 4096, 1, 4, 3);  // checksum blocks of 256 rows
  {
    cae::Hdf5Writer w(path);
    w.write("/images", images.data(), {n, 4096}, {chunk, 1});
    w.close();
  }
  // Where the fourth chunk (rows 192..255) lies in the file.
  haddr_t addr = 0;
  hsize_t size = 0;
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(f, "/images", H5P_DEFAULT);
    hsize_t offset[2] = {192, 0};
    unsigned mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &size), 0);
    H5Dclose(ds);
    H5Fclose(f);
  }
  ASSERT_GT(size, 16u);
  {
    FILE* fp = fopen(path.c_str(), "r+b");
    ASSERT_NE(fp, nullptr);
    for (hsize_t i = size / 2; i < size / 2 + 4; ++i) {
      fseek(fp, static_cast<long>(addr + i), SEEK_SET);
      const int byte = fgetc(fp);
      fseek(fp, static_cast<long>(addr + i), SEEK_SET);
      fputc(byte ^ 0x5a, fp);
    }
    fclose(fp);
  }
  cae::Hdf5Reader r(path);
  try {
    r.read<uint8_t>("/images");
    FAIL() << "a damaged chunk was read without an error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("/images"), std::string::npos) << msg;
    EXPECT_NE(msg.find("row 192"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // Rows outside the damaged chunk's checksum block (rows 0..255) still read.
  std::vector<uint8_t> tail(256 * 4096);
  r.read_rows<uint8_t>("/images", 256, 256, tail.data());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), images.begin() + 256 * 4096));
}

TEST(Hdf5FastRead, LayoutsWithoutAFastPathStillRead) {
  TempDir tmp;
  const hsize_t rows = 3000, cols = 1100;  // 13 MB of float32: large enough for the pread path
  const std::vector<float> values = random_values<float>(rows * cols, 1, 1000, 4);
  struct Case {
    const char* name;
    hid_t file_type;
    hsize_t userblock;
    std::function<void(hid_t)> layout;
  };
  const std::vector<Case> cases = {
      {"unfiltered chunks", H5T_IEEE_F32LE, 0, [](hid_t d) { hsize_t c[2] = {100, 1100}; H5Pset_chunk(d, 2, c); }},
      {"shuffle + deflate", H5T_IEEE_F32LE, 0,
       [](hid_t d) { hsize_t c[2] = {100, 1100}; H5Pset_chunk(d, 2, c); H5Pset_shuffle(d); H5Pset_deflate(d, 1); }},
      {"deflate, chunks not whole rows", H5T_IEEE_F32LE, 0,
       [](hid_t d) { hsize_t c[2] = {100, 300}; H5Pset_chunk(d, 2, c); H5Pset_deflate(d, 1); }},
      {"deflate, big-endian", H5T_IEEE_F32BE, 0,
       [](hid_t d) { hsize_t c[2] = {100, 1100}; H5Pset_chunk(d, 2, c); H5Pset_deflate(d, 1); }},
      {"contiguous", H5T_IEEE_F32LE, 0, [](hid_t) {}},
      {"contiguous after a 4 KB user block", H5T_IEEE_F32LE, 4096, [](hid_t) {}},
      {"contiguous, big-endian", H5T_IEEE_F32BE, 0, [](hid_t) {}},
  };
  for (const Case& c : cases) {
    const std::string path = tmp.path + "/case.h5";
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    c.layout(dcpl);
    write_raw_dataset(path, c.file_type, dcpl, rows, cols, values, c.userblock);
    H5Pclose(dcpl);
    cae::Hdf5Reader r(path);
    EXPECT_EQ(r.read<float>("/x", {rows, cols}), values) << c.name;
    std::vector<float> part(2500 * cols);
    r.read_rows<float>("/x", 333, 2500, part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), values.begin() + 333 * cols)) << c.name;
  }
}

// A block of rows over 64 MB is written in slices, each handed to the disk on its own
// (Hdf5Writer::write_rows_raw): every row lands where one write puts it, at the start of
// the dataset and past an offset, with a last slice shorter than the others.
TEST(Hdf5Write, LargeBlocksGoInSlicesThatAddUpToTheBlock) {
  TempDir tmp;
  const uint64_t rows = 37, cols = uint64_t(1) << 20;  // 4 MB rows: slices of 16, 16, 5 rows
  const std::vector<float> values = random_values<float>(rows * cols, 1, 1000, 6);
  const std::string path = tmp.path + "/big.h5";
  {
    cae::Hdf5Writer w(path);
    w.write("/whole", values.data(), {rows, cols});
    w.create<float>("/parts", {rows + 3, cols});
    w.write_rows<float>("/parts", 3, rows, values.data());
    w.write_rows<float>("/parts", 0, 3, values.data() + 34 * cols);
    w.close();
  }
  cae::Hdf5Reader r(path);
  EXPECT_EQ(r.read<float>("/whole", {rows, cols}), values);
  const std::vector<float> parts = r.read<float>("/parts", {rows + 3, cols});
  EXPECT_TRUE(std::equal(values.begin() + 34 * cols, values.end(), parts.begin()));
  EXPECT_TRUE(std::equal(values.begin(), values.end(), parts.begin() + 3 * cols));
}

// A split of 72 MB: read through the parallel pread path into a huge-page buffer.
TEST(Hdf5FastRead, FeaturesFileRoundTripAndANaNIsNamed) {
  TempDir tmp;
  const std::string path = tmp.path + "/features.h5";
  const ae::Architecture arch = ae::Architecture::seed();  // 8,192 features a row
  const int64_t n = 2200, d = arch.latent_dim();
  std::vector<float> feats = random_values<float>(static_cast<size_t>(n * d), 1, 500, 5);
  feats[static_cast<size_t>(1234 * d + 77)] = std::nanf("");
  std::vector<uint8_t> labels = random_values<uint8_t>(static_cast<size_t>(n), 0, 9, 6);
  {
    ae::FeaturesWriter w(path, path, arch, ae::FeatureDtype::float32);  // float16 would refuse the NaN
    w.begin_split("train", n);
    w.begin_split("test", 300);
    for (int64_t r = 0; r < n; r += 1024) w.write_rows("train", r, std::min<int64_t>(1024, n - r), feats.data() + r * d);
    w.write_rows("test", 0, 300, feats.data());
    w.write_labels("train", labels);
    w.write_labels("test", std::vector<uint8_t>(labels.begin(), labels.begin() + 300));
    w.finish(cae::Provenance{"ae-features", 1, "{}", {}}, {"cpu", 1.0, 1.0, {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}});
  }
  ae::FeaturesReader r(path);
  const ae::FeatureSplit test = r.read("test", -1);
  ASSERT_EQ(test.n, 300);
  EXPECT_TRUE(std::equal(test.X.begin(), test.X.end(), feats.begin()));
  try {
    r.read("train", -1);
    FAIL() << "a NaN feature was read without an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/train/features row 1234 feature 77 is NaN"), std::string::npos) << e.what();
  }
  const ae::FeatureSplit head = r.read("train", 1234);  // the rows before the NaN
  ASSERT_EQ(head.X.size(), static_cast<size_t>(1234 * d));
  EXPECT_TRUE(std::equal(head.X.begin(), head.X.end(), feats.begin()));
  EXPECT_TRUE(std::equal(head.labels.begin(), head.labels.end(), labels.begin()));
}

TEST(Hdf5Write, DeflatedShareOfASampleTellsPatternsFromNoise) {
  std::mt19937 rng(8);
  std::vector<uint8_t> noise(size_t(3) << 20);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> dark(noise.size(), 0);  // a bright pixel in every 16th, as in Fashion-MNIST's backgrounds
  for (size_t i = 0; i < dark.size(); i += 16) dark[i] = noise[i];
  EXPECT_GT(cae::deflated_share(noise.data(), noise.size(), 65536, 1), 0.99);
  EXPECT_LT(cae::deflated_share(dark.data(), dark.size(), 65536, 1), 0.5);
  // A piece larger than the data is the data; no data or no pieces: nothing shrinks.
  EXPECT_LT(cae::deflated_share(dark.data(), 1000, 65536, 1), 0.5);
  EXPECT_EQ(cae::deflated_share(dark.data(), 0, 65536, 1), 1.0);
  EXPECT_EQ(cae::deflated_share(dark.data(), dark.size(), 65536, 1, 0), 1.0);
  // Only the sample is compressed: 8 of the 48 pieces, evenly spread (0, 6, 12, ...). Noise
  // in all the others, 5/6 of the data, does not count.
  std::vector<uint8_t> mixed(noise);
  for (size_t k = 0; k < 48; k += 6) std::copy_n(dark.begin() + k * 65536, 65536, mixed.begin() + k * 65536);
  EXPECT_LT(cae::deflated_share(mixed.data(), mixed.size(), 65536, 1, 8), 0.5);
  EXPECT_GT(cae::deflated_share(mixed.data(), mixed.size(), 65536, 1, 48), 0.8);
}

// Images that deflate does not shrink by a tenth (photos) are stored contiguous; the rest
// chunked and deflated. Both read back exactly, whole and by row ranges (9 MB: the parallel
// pread path for the contiguous one).
TEST(Hdf5Write, ImageSplitsDeflatedOnlyWhereItPays) {
  TempDir tmp;
  std::mt19937 rng(9);
  cae::ImageSplit photos, dark;
  photos.C = dark.C = 3, photos.H = dark.H = 32, photos.W = dark.W = 32;
  const int64_t n = 3000;
  photos.images.resize(static_cast<size_t>(n * photos.image_bytes()));
  dark.images.resize(photos.images.size());
  for (size_t i = 0; i < photos.images.size(); ++i) {
    photos.images[i] = static_cast<uint8_t>(rng());
    dark.images[i] = i % 16 == 0 ? photos.images[i] : 0;
  }
  for (int64_t i = 0; i < n; ++i) photos.labels.push_back(static_cast<uint8_t>(i % 10));
  dark.labels = photos.labels;
  const std::string path = tmp.path + "/images.h5";
  {
    cae::Hdf5Writer w(path);
    cae::write_split(w, "train", photos);
    cae::write_split(w, "test", dark);
    cae::write_class_names(w, cae::cifar10_class_names());
    cae::write_provenance(w, cae::Provenance{cae::kDatasetFormat, 1, "{}", {}});
    w.close();
  }
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    for (auto [name, layout, filters] : {std::tuple<const char*, H5D_layout_t, int>{"/train/images", H5D_CONTIGUOUS, 0},
                                         {"/test/images", H5D_CHUNKED, 1}}) {
      hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), dcpl = H5Dget_create_plist(ds);
      EXPECT_EQ(H5Pget_layout(dcpl), layout) << name;
      EXPECT_EQ(H5Pget_nfilters(dcpl), filters) << name;
      H5Pclose(dcpl);
      H5Dclose(ds);
    }
    H5Fclose(f);
  }
  cae::DatasetReader r(path);
  for (const cae::ImageSplit* s : {&photos, &dark}) {
    const std::string split = s == &photos ? "train" : "test";
    const cae::ImageSplit back = r.read(split);
    EXPECT_TRUE(std::equal(back.images.begin(), back.images.end(), s->images.begin())) << split;
    EXPECT_EQ(back.labels, s->labels) << split;
    std::vector<uint8_t> part(static_cast<size_t>(2900 * s->image_bytes()));
    r.read_images(split, 37, 2900, part.data());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), s->images.begin() + 37 * s->image_bytes())) << split;
  }
}

}  // namespace

// A format's reader names the tool that writes it; hdf5_io itself knows no tool names.
TEST(Hdf5Format, TheCallerNamesTheWriterOfTheExpectedFormat) {
  TempDir dir;
  const std::string path = dir.path + "/f.h5", bare = dir.path + "/bare.h5";
  {
    cae::Hdf5Writer w(path);
    w.write("/x", std::vector<float>{1.5f, -2.0f});
    w.set_attr("/", "format", "ae-features");
    w.close();
    cae::Hdf5Writer b(bare);
    b.write("/x", std::vector<float>{0.25f});
    b.close();
  }
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  cae::Hdf5Reader r(path), b(bare);
  EXPECT_EQ(message([&] { r.require_format("ae-model", "ae-train"); }),
            path + ": is an ae-features file, expected ae-model, which ae-train writes");
  EXPECT_EQ(message([&] { r.require_format("ae-model"); }), path + ": is an ae-features file, expected ae-model");
  EXPECT_EQ(message([&] { b.require_format("ae-model", "ae-train"); }),
            bare + ": not an ae-model file (no 'format' attribute); ae-train writes those");
  EXPECT_EQ(message([&] { r.require_format("ae-features", "ae-encode"); }), "no error");
}

// Converting reads: integers of any width into int64, float64 into float32; never across kinds.
TEST(Hdf5Format, ConvertingReadsStayWithinAKind) {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  std::vector<double> d(64);
  for (double& v : d) v = u(rng);
  const std::vector<uint8_t> small = {3, 200, 7, 0};
  {
    cae::Hdf5Writer w(path);
    w.write("/d", d.data(), {16, 4});
    w.write("/u8", small);
    w.close();
  }
  cae::Hdf5Reader r(path);
  EXPECT_EQ(r.read<double>("/d", {16, 4}), d);  // stored as float64: the strict read takes it
  std::vector<float> f(64);
  r.read_rows_converting<float>("/d", 0, 16, f.data());
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(f[i], static_cast<float>(d[i]));
  std::vector<int64_t> wide(4);
  r.read_rows_converting<int64_t>("/u8", 0, 4, wide.data());
  for (size_t i = 0; i < small.size(); ++i) EXPECT_EQ(wide[i], small[i]);
  EXPECT_THROW(r.read_rows_converting<int64_t>("/d", 0, 1, wide.data()), std::runtime_error);
  EXPECT_THROW(r.read_rows_converting<float>("/u8", 0, 1, f.data()), std::runtime_error);
}
