// Unit tests of common/: HDF5 round trips and checks, atomic outputs, JSON, SHA-256.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <stdexcept>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "common/atomic_output.h"
#include "common/cli.h"
#include "common/device.h"
#include "common/error.h"
#include "common/escape.h"
#include "common/hdf5_io.h"
#include "common/hdf5_probe.h"
#include "common/json.h"
#include "common/memory_limit.h"
#include "common/proc_status.h"
#include "common/progress.h"
#include "common/provenance.h"
#include "common/version.h"
#include "common/sha256.h"
#include "tests/support/temp_dir.h"

namespace {

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
  // Set so that run_tool's compute-environment setup (common/blas_runtime.h) leaves the
  // process as it is; OpenBLAS has read its variable already, so a value set here changes
  // nothing else.
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
  const cae_test::TempDir tmp("cae-unit");
  const std::string path = tmp.file("t.h5");
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
  const cae_test::TempDir tmp("cae-unit");
  const std::string path = tmp.file("ints.h5");
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
}

// The reader sandbox on its own: a good file passes, a file HDF5 cannot open is refused
// with one line naming it.
TEST(Hdf5Probe, PassesAGoodFileAndRefusesABadOne) {
  const cae_test::TempDir tmp("cae-unit");
  const std::string good = tmp.file("good.h5"), bad = tmp.file("bad.h5");
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
}

TEST(Hdf5, NonHdf5FileIsAClearError) {
  const cae_test::TempDir tmp("cae-unit");
  const std::string path = tmp.file("junk.h5");
  std::ofstream(path) << "not hdf5 at all";
  try {
    cae::Hdf5Reader r(path);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not an HDF5 file (or truncated/corrupted)");
  }
}

TEST(AtomicOutput, RenamesOnCommitAndCleansUpOtherwise) {
  const cae_test::TempDir tmp("cae-unit");
  std::string dir = tmp.path;
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

// run_tool on a command line, with one option of each kind a tool declares; stdout and
// stderr captured.
struct ParsedRun {
  int status;
  std::string out, err;
};
ParsedRun run_tool_with(std::vector<std::string> args) {
  const bool had_core = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  const bool had_wait = std::getenv("OMP_WAIT_POLICY") != nullptr;
  setenv("OPENBLAS_CORETYPE", "unchanged", 0);
  setenv("OMP_WAIT_POLICY", "passive", 0);
  const cae::ToolInfo info{"ae-train", "purpose", "example", false, false, "hint"};
  cae::CommonOptions common;
  args.insert(args.begin(), "ae-train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int epochs = 20;
  float lr = 1e-3f, momentum = 0.0f;
  std::string optimizer = "adam";
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int status = cae::run_tool(
      int(args.size()), argv.data(), info, common,
      [&](CLI::App& app) {
        app.add_option("--epochs", epochs, "Epochs")->check(CLI::NonNegativeNumber);
        app.add_option("--lr", lr, "Learning rate")->check(CLI::PositiveNumber);
        app.add_option("--momentum", momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
        app.add_option("--optimizer", optimizer, "adam or sgd")->check(CLI::IsMember({"adam", "sgd"}));
      },
      [] {});
  ParsedRun r{status, testing::internal::GetCapturedStdout(), testing::internal::GetCapturedStderr()};
  if (!had_core) unsetenv("OPENBLAS_CORETYPE");
  if (!had_wait) unsetenv("OMP_WAIT_POLICY");
  return r;
}

// CLI11's raw messages (a 300-digit range, no suggestion) are rewritten in the toolkit's
// words; 7 cases.
TEST(RunTool, ParseErrorsInTheToolkitsWords) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"--epochs", "abc"}, "--epochs: 'abc' is not an integer"},
      {{"--epochs", "1.5"}, "--epochs: '1.5' is not an integer"},
      {{"--epochs", "-3"}, "--epochs: -3 is negative; give a value >= 0"},
      {{"--lr", "0"}, "--lr: 0 is not > 0"},
      {{"--momentum", "2"}, "--momentum: 2 is not in [0, 1]"},
      {{"--optimizer", "adamw"}, "--optimizer: 'adamw' is not one of adam|sgd"},
      {{"--epoch", "3"}, "unknown option --epoch (did you mean --epochs?)"},
  };
  for (const Case& c : cases) {
    const ParsedRun r = run_tool_with(c.args);
    EXPECT_EQ(r.status, 2) << c.message;
    EXPECT_EQ(r.err, std::string("ae-train: usage error: ") + c.message + " (see --help)\n");
  }
}

TEST(RunTool, HelpShowsRangesInWords) {
  const ParsedRun r = run_tool_with({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--momentum FLOAT in [0, 1] (default 0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--epochs INT >= 0 (default 20)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--lr FLOAT > 0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FLOAT:FLOAT"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("NONNEGATIVE"), std::string::npos) << r.out;
}

TEST(Progress, BarFitsTheTerminalAndShowsTheRunsEta) {
  cae::ProgressBar bar("epoch 3/20", 45000, "img");
  bar.set_run(90000, 900000, 120.0);
  for (int columns : {200, 80, 60, 30}) {
    const std::string line = bar.render(12000, "loss 0.01234", 10.0, columns);
    EXPECT_LT(int(line.size()), columns) << line;
    EXPECT_EQ(line.rfind("epoch 3/20 [", 0), 0u) << line;
  }
  const std::string wide = bar.render(12000, "loss 0.01234", 10.0, 200);
  EXPECT_NE(wide.find("12000/45000 1200 img/s ETA 0m28s (run 16m57s) loss 0.01234"), std::string::npos) << wide;
}

// A pipeline that trains into a hidden checkpoint and renames it when done passes
// --record-output-as: the file's provenance then names the file the user gets.
TEST(RunTool, RecordOutputAsNamesTheRenamedFileInTheProvenance) {
  const cae_test::TempDir tmp("cae-unit");
  const std::string ckpt = tmp.file(".model-abc.ckpt.h5"), model = tmp.file("model.h5");
  { std::ofstream(model) << "an earlier model, replaced by the rename"; }  // a re-training: it exists
  auto run = [&](std::vector<std::string> args, std::string* params) {
    setenv("OPENBLAS_CORETYPE", "unchanged", 0);
    setenv("OMP_WAIT_POLICY", "passive", 0);
    const cae::ToolInfo info{"ae-train", "purpose", "example", false, true, "hint"};
    cae::CommonOptions common;
    int epochs = 20;
    args.insert(args.begin(), "ae-train");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const int status = cae::run_tool(
        int(args.size()), argv.data(), info, common,
        [&](CLI::App& app) { app.add_option("--epochs", epochs, "Epochs"); }, [&] { *params = cae::options_json(); });
    const std::string out = testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
    EXPECT_EQ(status, 0) << out;
    return out;
  };
  std::string params;
  run({"--epochs", "3", "-o", ckpt, "--record-output-as", model}, &params);
  EXPECT_NE(params.find("\"output\":\"" + model + "\""), std::string::npos) << params;
  EXPECT_EQ(params.find("ckpt"), std::string::npos) << params;
  EXPECT_EQ(params.find("record-output-as"), std::string::npos) << params;
  EXPECT_NE(params.find("\"epochs\":\"3\""), std::string::npos) << params;
  // Without it, the output is -o as given; the option is plumbing, not in --help.
  run({"-o", ckpt}, &params);
  EXPECT_NE(params.find("\"output\":\"" + ckpt + "\""), std::string::npos) << params;
  const std::string help = run({"--help"}, &params);
  EXPECT_NE(help.find("--output"), std::string::npos) << help;
  EXPECT_EQ(help.find("--record-output-as"), std::string::npos) << help;
}

TEST(Version, NoGitUnknownInTheVersionLine) {
  const std::string line = cae::version_line("ae-train");
  EXPECT_EQ(line.rfind(std::string("ae-train ") + cae::version() + " (", 0), 0u) << line;
  EXPECT_EQ(line.find("git unknown"), std::string::npos) << line;
}

TEST(Hdf5, WrongFormatNamesTheToolThatWritesTheExpectedOne) {
  const cae_test::TempDir tmp("cae-unit");
  const std::string path = tmp.file("f.h5");
  {
    cae::Hdf5Writer w(path);
    const std::vector<float> x = {1.5f, -2.0f};
    w.write("/x", x);
    w.set_attr("/", "format", "ae-features");
    w.close();
  }
  cae::Hdf5Reader r(path);
  try {
    r.require_format("ae-model", "ae-train");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": is an ae-features file, expected ae-model, which ae-train writes");
  }
}

}  // namespace

namespace {

// `size` random bytes (from `seed`) written to `path`; returns them.
std::string write_random_file(const std::string& path, size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  { std::ofstream(path, std::ios::binary) << bytes; }
  return bytes;
}

// sha256_file keeps each digest in the file's extended attribute and reuses it while the
// file's size and modification time are unchanged (issue 17: hash each file once).
TEST(Sha256Cache, ADigestIsReusedUntilTheFileChanges) {
  const std::string path = ::testing::TempDir() + "sha-cache-" + std::to_string(getpid());
  std::string bytes = write_random_file(path, 3 << 20, 3);
  const std::string digest = cae::sha256_file(path);
  EXPECT_EQ(digest, cae::sha256_hex(bytes.data(), bytes.size()));
  char value[256];
  const ssize_t len = getxattr(path.c_str(), cae::kSha256Xattr, value, sizeof(value));
  if (len < 0) {
    std::remove(path.c_str());
    GTEST_SKIP() << "no user extended attributes on " << ::testing::TempDir() << ": nothing is cached there";
  }
  EXPECT_EQ(std::string(value, size_t(len)).substr(size_t(len) - 64), digest);
  // The cache is what a second call reads: a planted digest with the same size and time
  // comes back (so no second pass over the bytes).
  std::string planted(value, size_t(len) - 64);
  planted += std::string(64, 'a');
  ASSERT_EQ(setxattr(path.c_str(), cae::kSha256Xattr, planted.data(), planted.size(), 0), 0);
  EXPECT_EQ(cae::sha256_file(path), std::string(64, 'a'));
  // Rewriting the file (same size, new bytes) changes its modification time: hashed afresh.
  bytes[12345] ^= 1;
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
  struct timespec later[2] = {{0, UTIME_OMIT}, {0, 0}};
  clock_gettime(CLOCK_REALTIME, &later[1]);
  later[1].tv_nsec = (later[1].tv_nsec + 1) % 1000000000;  // a different time even on a coarse clock
  utimensat(AT_FDCWD, path.c_str(), later, 0);
  EXPECT_EQ(cae::sha256_file(path), cae::sha256_hex(bytes.data(), bytes.size()));
  // A garbled attribute is ignored, never trusted.
  ASSERT_EQ(setxattr(path.c_str(), cae::kSha256Xattr, "nonsense", 8, 0), 0);
  EXPECT_EQ(cae::sha256_file(path), cae::sha256_hex(bytes.data(), bytes.size()));
  std::remove(path.c_str());
}

// sha256_file reads ahead on a thread of its own through a ring of 4 MB slots: a file of
// several rounds of the ring and a ragged end, one of exactly one slot, and an empty one
// hash as their bytes do.
TEST(Sha256Cache, FilesOfAnySizeHashAsTheirBytes) {
  for (const size_t size : {size_t{13} << 20 | 5, size_t{4} << 20, size_t{0}}) {
    const std::string path = ::testing::TempDir() + "sha-sizes-" + std::to_string(getpid());
    const std::string bytes = write_random_file(path, size, 9);
    EXPECT_EQ(cae::sha256_file(path), cae::sha256_hex(bytes.data(), bytes.size())) << size << " bytes";
    std::remove(path.c_str());
  }
}

// A cancelled hash stops and caches nothing (BackgroundHashes cancels when a tool ends
// without asking for its digests); not cancelled, the flag changes nothing.
TEST(Sha256Cache, ACancelledHashReturnsNothingAndCachesNothing) {
  const std::string path = ::testing::TempDir() + "sha-cancel-" + std::to_string(getpid());
  const std::string bytes = write_random_file(path, 3 << 20, 5);
  std::atomic<bool> cancel(true);
  EXPECT_EQ(cae::sha256_file(path, &cancel), "");
  char value[256];
  EXPECT_LT(getxattr(path.c_str(), cae::kSha256Xattr, value, sizeof(value)), 0) << "a cancelled digest was cached";
  cancel = false;
  EXPECT_EQ(cae::sha256_file(path, &cancel), cae::sha256_hex(bytes.data(), bytes.size()));
  std::remove(path.c_str());
}

// BackgroundHashes: get() gives each input's digest in order; one destroyed without get()
// returns (its thread stopped), also on a file still being hashed.
TEST(Sha256Cache, BackgroundHashesGiveTheDigestsOrStopWhenDropped) {
  const std::string a = ::testing::TempDir() + "bg-hash-a-" + std::to_string(getpid());
  const std::string b = ::testing::TempDir() + "bg-hash-b-" + std::to_string(getpid());
  const std::string big(64 << 20, 'x'), small = "features";
  { std::ofstream(a, std::ios::binary) << big; }
  { std::ofstream(b, std::ios::binary) << small; }
  { cae::BackgroundHashes dropped({a, b}); }
  cae::BackgroundHashes hashes({a, b});
  const std::vector<cae::InputFile> got = hashes.get();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, a);
  EXPECT_EQ(got[0].sha256, cae::sha256_hex(big.data(), big.size()));
  EXPECT_EQ(got[1].sha256, cae::sha256_hex(small.data(), small.size()));
  std::remove(a.c_str());
  std::remove(b.c_str());
}

// ---- names from outside, escaped per output syntax (issue 30, class 4) ----------------------

TEST(Escape, QuotedNameLeavesPlainNamesAndEscapesControls) {
  EXPECT_EQ(cae::quoted_name("train/cat/img 1.jpg"), "train/cat/img 1.jpg");
  EXPECT_EQ(cae::quoted_name("d\xC3\xA9j\xC3\xA0/\xE7\x8C\xAB.png"), "d\xC3\xA9j\xC3\xA0/\xE7\x8C\xAB.png");  // UTF-8 stays
  EXPECT_EQ(cae::quoted_name("train/cat\ndog/bad.jpg"), "\"train/cat\\ndog/bad.jpg\"");
  EXPECT_EQ(cae::quoted_name("a\033[2Jb"), "\"a\\x1B[2Jb\"");
  EXPECT_EQ(cae::quoted_name("q\"\\\t\r\x7F"), "\"q\\\"\\\\\\t\\r\\x7F\"");
  // Bytes that are not UTF-8, and C1 controls (U+009B is a one-character CSI), are escaped.
  EXPECT_EQ(cae::quoted_name("x\xFFy"), "\"x\\xFFy\"");
  EXPECT_EQ(cae::quoted_name("x\xC2\x9B" "2J"), "\"x\\xC2\\x9B2J\"");
  EXPECT_EQ(cae::quoted_name("\xE0\x80\xAF"), "\"\\xE0\\x80\\xAF\"");  // overlong '/'
}

TEST(Escape, FailFileIsOneLineWhateverTheName) {
  try {
    cae::fail_file("train/cat\ndog/bad.jpg", "corrupt JPEG");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "\"train/cat\\ndog/bad.jpg\": corrupt JPEG");
  }
  try {
    cae::fail_unsupported("x\033]0;title\007.jpg", "JPEG: 12-bit");
    FAIL();
  } catch (const cae::UnsupportedInput& e) {
    EXPECT_STREQ(e.what(), "\"x\\x1B]0;title\\x07.jpg\": unsupported JPEG: 12-bit");
  }
  EXPECT_EQ(cae::escape_controls("skipped a\nb: c\033[K"), "skipped a\\nb: c\\x1B[K");
}

TEST(Escape, JsonStringsEscapeEveryControlCharacter) {
  const std::string all = [] {
    std::string s;
    for (int c = 1; c < 0x20; ++c) s += char(c);
    return s + "\x7F\"\\";
  }();
  const std::string j = cae::json_escape(all);
  for (char c : j) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << j;
  EXPECT_NE(j.find("\\u001b"), std::string::npos);
}

// ---- the cgroup memory limit (issue 30) -----------------------------------------------------

class CgroupTree : public ::testing::Test {
 protected:
  std::string root;
  void SetUp() override {
    char tmpl[] = "/tmp/cgroup-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
  }
  void TearDown() override { ASSERT_EQ(system(("rm -rf '" + root + "'").c_str()), 0); }
  void put(const std::string& rel, const std::string& text) {
    ASSERT_EQ(system(("mkdir -p \"$(dirname '" + root + "/" + rel + "')\"").c_str()), 0);
    std::ofstream(root + "/" + rel) << text;
  }
};

TEST_F(CgroupTree, V2TakesTheSmallestLimitOfTheCgroupAndItsAncestors) {
  put("proc_cgroup", "0::/slurm/uid_0/job_7/step_0\n");
  put("fs/slurm/memory.max", "max\n");
  put("fs/slurm/uid_0/job_7/memory.max", "2147483648\n");
  put("fs/slurm/uid_0/job_7/step_0/memory.max", "4294967296\n");
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/fs", root + "/proc_cgroup"), uint64_t(2147483648));
}

TEST_F(CgroupTree, V1MemoryControllerAndItsNoLimitValue) {
  put("proc_cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n");
  put("fs/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  put("fs/memory/docker/abc/memory.limit_in_bytes", "536870912\n");
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/fs", root + "/proc_cgroup"), uint64_t(536870912));
}

TEST_F(CgroupTree, ContainerRootNoLimitAndGarbage) {
  put("proc_cgroup", "0::/\n");
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/fs", root + "/proc_cgroup"), 0u);  // nothing there
  put("fs/memory.max", "max\n");
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/fs", root + "/proc_cgroup"), 0u);
  put("fs/memory.max", "12x\n");
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/fs", root + "/proc_cgroup"), 0u);
  put("fs/memory.max", "1073741824\n");
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/fs", root + "/proc_cgroup"), uint64_t(1) << 30);
  EXPECT_EQ(cae::cgroup_memory_limit(root + "/none", root + "/no-such-file"), 0u);
}

// ---- /proc/self/status ---------------------------------------------------------------------

// A fake status file in a temporary folder.
class ProcStatusFile : public CgroupTree {};

TEST_F(ProcStatusFile, FieldsInBytes) {
  // The kernel's layout: a tab after the colon, the number right-aligned, then " kB".
  put("status", "Name:\tunit_tests\nVmPeak:\t  812344 kB\nVmSize:\t  798212 kB\nVmDataX:\t1 kB\n"
                "VmData:\t   53180 kB\nThreads:\t3\n");
  const std::string status = root + "/status";
  EXPECT_EQ(cae::proc_status_bytes("VmSize", status.c_str()), uint64_t(798212) * 1024);
  EXPECT_EQ(cae::proc_status_bytes("VmData", status.c_str()), uint64_t(53180) * 1024);
  EXPECT_EQ(cae::proc_status_bytes("VmPeak", status.c_str()), uint64_t(812344) * 1024);
  // A field that is only a prefix of another, one without "kB", one that is not there.
  EXPECT_EQ(cae::proc_status_bytes("Vm", status.c_str()), 0u);
  EXPECT_EQ(cae::proc_status_bytes("Threads", status.c_str()), 0u);
  EXPECT_EQ(cae::proc_status_bytes("VmSwap", status.c_str()), 0u);
  EXPECT_EQ(cae::proc_status_bytes("VmSize", (root + "/no-such-file").c_str()), 0u);
  put("status", "VmSize:\tlots kB\n");
  EXPECT_EQ(cae::proc_status_bytes("VmSize", status.c_str()), 0u);
}

TEST(ProcStatus, ThisProcessMapsWhatItAllocates) {
  const uint64_t size = cae::proc_status_bytes("VmSize"), data = cae::proc_status_bytes("VmData");
  ASSERT_GT(data, 0u);
  EXPECT_GE(size, data);  // the data segment is part of the address space
  // 256 MB taken (and touched, so no lazy accounting hides it) shows in VmData.
  std::vector<char> block(size_t(256) << 20, 1);
  const uint64_t data_after = cae::proc_status_bytes("VmData");
  EXPECT_GE(data_after, data + (uint64_t(255) << 20)) << "block at " << static_cast<const void*>(block.data());
}

}  // namespace

// --device as cae::DeviceChoice answers it: at once for cpu, from one driver question for
// auto and gpu (asked beside the caller's work, the same answer on every thread).
TEST(DeviceChoice, AnswersAsTheDriverDoes) {
  EXPECT_THROW(cae::DeviceChoice("tpu"), cae::UsageError);
  const cae::DeviceChoice cpu("cpu");
  EXPECT_FALSE(cpu.may_use_gpu());
  EXPECT_EQ(cpu.get(), cae::Device::cpu);
  const cae::Device found = cae::gpu_available() ? cae::Device::gpu : cae::Device::cpu;
  const cae::DeviceChoice automatic("auto"), gpu("gpu");
  EXPECT_TRUE(automatic.may_use_gpu());
  EXPECT_TRUE(gpu.may_use_gpu());
  std::vector<cae::Device> seen(4, cae::Device::cpu);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = cae::DeviceChoice("auto").get(); });
  for (std::thread& t : threads) t.join();
  for (const cae::Device d : seen) EXPECT_EQ(d, found);
  EXPECT_EQ(automatic.get(), found);
  if (found == cae::Device::gpu) {
    EXPECT_EQ(gpu.get(), cae::Device::gpu);
  } else {
    try {
      gpu.get();
      ADD_FAILURE() << "--device gpu without a GPU was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("--device gpu: ", 0), 0u) << e.what();
    }
  }
  // A device given as such is --device with its name.
  EXPECT_FALSE(cae::DeviceChoice(cae::Device::cpu).may_use_gpu());
  if (found == cae::Device::gpu) EXPECT_EQ(cae::DeviceChoice(cae::Device::gpu).get(), cae::Device::gpu);
  else EXPECT_THROW(cae::DeviceChoice(cae::Device::gpu).get(), std::runtime_error);
  EXPECT_EQ(cae::DeviceChoice("auto").get(), found);  // a second choice: the same, one question
}
