// Unit tests of common/: HDF5 round trips and checks, atomic outputs, JSON, SHA-256.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <stdexcept>
#include <fstream>
#include <random>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/hdf5_probe.h"
#include "common/json.h"
#include "common/sha256.h"

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/cae-unit-XXXXXX";
  return mkdtemp(tmpl);
}

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// How run_tool reports what a tool's work threw: the exit status and the one stderr line.
struct ToolRun {
  int status;
  std::string err;
};
ToolRun run_tool_throwing(const std::function<void()>& work) {
  // run_tool re-executes the program once unless these are set (common/blas_runtime.h);
  // OpenBLAS has read its variable already, so a value set here changes nothing else.
  const bool had_core = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  const bool had_wait = std::getenv("OMP_WAIT_POLICY") != nullptr;
  setenv("OPENBLAS_CORETYPE", "unchanged", 0);
  setenv("OMP_WAIT_POLICY", "passive", 0);
  const cae::ToolInfo info{"ae-train", "purpose", "example", true, false, "try a smaller --batch-size"};
  cae::CommonOptions common;
  char name[] = "ae-train";
  char* argv[] = {name, nullptr};
  testing::internal::CaptureStderr();
  const int status = cae::run_tool(1, argv, info, common, [](CLI::App&) {}, work);
  ToolRun r{status, testing::internal::GetCapturedStderr()};
  if (!had_core) unsetenv("OPENBLAS_CORETYPE");
  if (!had_wait) unsetenv("OMP_WAIT_POLICY");
  return r;
}

TEST(RunTool, OutOfMemoryNamesTheOptionToLower) {
  ToolRun gpu = run_tool_throwing([] {
    throw cae::OutOfDeviceMemory("GPU out of memory: 12.00 GiB more were needed with 3.00 of 80.00 GiB free");
  });
  EXPECT_EQ(gpu.status, 1);
  EXPECT_EQ(gpu.err,
            "ae-train: error: GPU out of memory: 12.00 GiB more were needed with 3.00 of 80.00 GiB free (try a "
            "smaller --batch-size)\n");
  ToolRun host = run_tool_throwing([] { throw std::bad_alloc(); });
  EXPECT_EQ(host.status, 1);
  EXPECT_EQ(host.err, "ae-train: error: out of memory (try a smaller --batch-size)\n");
  ToolRun other = run_tool_throwing([] { throw std::runtime_error("data.h5: not an HDF5 file"); });
  EXPECT_EQ(other.status, 1);
  EXPECT_EQ(other.err, "ae-train: error: data.h5: not an HDF5 file\n");
  ToolRun usage = run_tool_throwing([] { throw cae::UsageError("--lr must be positive"); });
  EXPECT_EQ(usage.status, 2);
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(cae::sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(cae::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Streaming in odd pieces gives the same digest as one call.
  std::string msg(1000, 'x');
  cae::Sha256 s;
  for (size_t i = 0; i < msg.size(); i += 37) s.update(msg.data() + i, std::min<size_t>(37, msg.size() - i));
  EXPECT_EQ(s.hex_digest(), cae::sha256_hex(msg.data(), msg.size()));
}

TEST(Json, EscapesAndNumbers) {
  auto j = cae::JsonObject().add("a\"b", "x\ny").add("n", 0.1).add("i", int64_t{-3}).add("t", true).add("nan", 0.0 / 0.0);
  EXPECT_EQ(j.str(), "{\"a\\\"b\":\"x\\ny\",\"n\":0.1,\"i\":-3,\"t\":true,\"nan\":null}");
}

TEST(Hdf5, RoundTripTypesShapesAndAttributes) {
  std::string dir = temp_dir(), path = dir + "/t.h5";
  std::mt19937 rng(7);
  std::vector<float> f(600);
  for (auto& v : f) v = std::uniform_real_distribution<float>(-3, 3)(rng);
  std::vector<uint8_t> u(1000 * 12);
  for (auto& v : u) v = static_cast<uint8_t>(rng());
  {
    cae::Hdf5Writer w(path);
    w.write("/a/b/floats", f.data(), {20, 30});
    w.write("/bytes", u.data(), {1000, 12}, {64, 1});  // parallel compressed path, ragged edge chunk
    w.create<int64_t>("/stream", {10});
    std::vector<int64_t> part = {5, 6, 7};
    w.write_rows("/stream", 7, 3, part.data());
    w.set_attr("/", "name", "value");
    w.set_attr("/a", "pi", 3.25);
    w.set_attr("/", "list", std::vector<std::string>{"x", "yy"});
    w.close();
  }
  cae::Hdf5Reader r(path);
  EXPECT_TRUE(r.has("/a/b/floats"));
  EXPECT_FALSE(r.has("/a/nope/x"));
  EXPECT_EQ(r.read<float>("/a/b/floats", {20, 0}), f);
  EXPECT_EQ(r.read<uint8_t>("/bytes"), u);
  std::vector<uint8_t> rows(12 * 3);
  r.read_rows<uint8_t>("/bytes", 997, 3, rows.data());
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), u.begin() + 997 * 12));
  EXPECT_EQ(r.read<int64_t>("/stream")[8], 6);
  EXPECT_EQ(r.attr_string("/", "name"), "value");
  EXPECT_EQ(r.attr_double("/a", "pi"), 3.25);
  EXPECT_EQ(r.attr_strings("/", "list"), (std::vector<std::string>{"x", "yy"}));
  // Wrong dtype, wrong shape and missing datasets are errors that name file and dataset.
  EXPECT_THROW(r.read<double>("/a/b/floats"), std::runtime_error);
  try {
    r.read<float>("/a/b/floats", {30, 20});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": /a/b/floats has shape [20,30], expected [30,20]"), std::string::npos);
  }
  EXPECT_THROW(r.shape("/missing"), std::runtime_error);
  EXPECT_THROW(r.require_format("cifar10-dataset"), std::runtime_error);
}

// Integer arrays as attributes: how model files record their architecture
// (encoder_channels, input_shape) and features files their latent_shape.
TEST(Hdf5, IntegerArrayAttributes) {
  std::string dir = temp_dir(), path = dir + "/ints.h5";
  {
    cae::Hdf5Writer w(path);
    w.set_attr("/", "encoder_channels", std::vector<int64_t>{96, 48, 24});
    w.set_attr("/", "one", int64_t{7});
    w.set_attr("/", "pi", 3.25);
    w.close();
  }
  cae::Hdf5Reader r(path);
  EXPECT_EQ(r.attr_ints("/", "encoder_channels"), (std::vector<int64_t>{96, 48, 24}));
  EXPECT_EQ(r.attr_ints("/", "one"), (std::vector<int64_t>{7}));
  EXPECT_EQ(r.attr_doubles("/", "encoder_channels"), (std::vector<double>{96, 48, 24}));
  try {
    r.attr_ints("/", "pi");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": attribute pi is not an integer");
  }
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// The reader sandbox on its own: a good file passes, a file HDF5 cannot open is refused
// with one line naming it.
TEST(Hdf5Probe, PassesAGoodFileAndRefusesABadOne) {
  std::string dir = temp_dir(), good = dir + "/good.h5", bad = dir + "/bad.h5";
  {
    cae::Hdf5Writer w(good);
    w.write("/x", std::vector<float>{1, 2, 3});
    w.set_attr("/x", "unit", "m");
    w.close();
  }
  EXPECT_NO_THROW(cae::probe_hdf5_metadata(good));
  std::ofstream(bad) << "not hdf5 at all";
  try {
    cae::probe_hdf5_metadata(bad);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), bad + ": cannot open as HDF5 (truncated or corrupted?)");
  }
  cae::set_hdf5_metadata_probe(false);  // off: nothing is checked
  EXPECT_NO_THROW(cae::probe_hdf5_metadata(bad));
  cae::set_hdf5_metadata_probe(true);
  unlink(good.c_str());
  unlink(bad.c_str());
  rmdir(dir.c_str());
}

TEST(Hdf5, NonHdf5FileIsAClearError) {
  std::string dir = temp_dir(), path = dir + "/junk.h5";
  std::ofstream(path) << "not hdf5 at all";
  try {
    cae::Hdf5Reader r(path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not an HDF5 file (or truncated/corrupted)");
  }
}

TEST(AtomicOutput, RenamesOnCommitAndCleansUpOtherwise) {
  std::string dir = temp_dir();
  {
    cae::AtomicOutput out(dir + "/a.txt");
    std::ofstream(out.temp_path()) << "half";
    EXPECT_TRUE(exists(out.temp_path()));
    EXPECT_FALSE(exists(dir + "/a.txt"));
  }  // destroyed without commit, as after an exception
  EXPECT_FALSE(exists(dir + "/a.txt"));
  std::string temp;
  {
    cae::AtomicOutput out(dir + "/b.txt");
    temp = out.temp_path();
    std::ofstream(out.temp_path()) << "whole";
    out.commit();
  }
  EXPECT_TRUE(exists(dir + "/b.txt"));
  EXPECT_FALSE(exists(temp));
  EXPECT_THROW(cae::AtomicOutput(dir + "/no/such/dir/c.txt"), std::runtime_error);
  EXPECT_THROW(cae::AtomicOutput{dir}, std::runtime_error);  // a folder
}

}  // namespace
