// Reliability (issue 8): every input that ever crashed a reader — found by the fuzzers or by
// the byte-flip tests — is kept under tests/fuzz/regressions/ and replayed here through every
// reader entry point. Also checks the HDF5 metadata probe that turned those crashes into errors.
#include <dirent.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "common/atomic_output.h"
#include "common/blas_runtime.h"
#include "common/cli.h"
#include "common/error.h"
#include "common/hdf5_io.h"
#include "common/hdf5_probe.h"
#include "tests/fuzz/fuzz_readers.h"
#include "tests/support/temp_dir.h"

#include <cmath>

namespace {

// Compiled from the repository root (sources are named relative to it), so __FILE__ is
// "tests/unit/..."; the suite also runs from the root (tests/run-all.sh).
const std::string kRegressions = "tests/fuzz/regressions";

std::vector<std::string> regression_files(const std::string& suffix) {
  std::vector<std::string> out;
  DIR* d = opendir(kRegressions.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(kRegressions + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool no_children_left() {
  int status;
  return waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

TEST(Reliability, RegressionFilesExist) {
  EXPECT_GE(regression_files(".h5").size(), 3u) << "run the unit tests from the repository root";
}

TEST(Reliability, EveryHdf5RegressionIsRefusedByEveryReaderWithoutCrashing) {
  // svm-model-hdf5-endless-loop.h5 makes HDF5 loop forever: the probe's alarm ends it
  // (20 s by default; 2 s here keeps the suite quick).
  setenv("CAE_HDF5_PROBE_SECONDS", "2", 1);
  for (const std::string& path : regression_files(".h5")) {
    SCOPED_TRACE(path);
    // Each of these files is damaged: no reader may accept it (4 readers, 4 refusals).
    EXPECT_EQ(fuzz::read_with_every_reader(path), 4);
  }
  unsetenv("CAE_HDF5_PROBE_SECONDS");
  EXPECT_TRUE(no_children_left());
}

TEST(Reliability, ArchiveRegressionsAreRefusedWithoutCrashing) {
  // archive-null-error-string.tar.gz: libarchive gave a NULL error string, which
  // read_archive turned into std::string (SIGSEGV in strlen).
  const auto files = regression_files(".tar.gz");
  EXPECT_GE(files.size(), 1u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    EXPECT_THROW(cae::read_cifar_binary(path, 1, 1), std::runtime_error);
  }
}

TEST(Reliability, DamagedGlobalHeapIsNamedAsCorruption) {
  // A flipped byte in the global heap (variable-length strings) made H5Aread copy out of
  // bounds: the probe's child crashes instead of the tool, and the message says so.
  // Whether the out-of-bounds copy faults depends on the heap around it, so the open runs in
  // a fresh process (gtest's threadsafe death test re-executes this binary for this test
  // alone), as it would in a tool, not in the heap left by the tests before it.
  const std::string path = kRegressions + "/features-globalheap-segv.h5";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        try {
          cae::Hdf5Reader r(path);
          std::fprintf(stderr, "opened a file whose metadata crashes HDF5\n");
          std::_Exit(1);
        } catch (const std::runtime_error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(std::string(e.what()).find(path + ": corrupted HDF5") != std::string::npos ? 0 : 1);
        }
      },
      ::testing::ExitedWithCode(0), "corrupted HDF5");
  // A string length of ~8 GB: refused under the probe's memory limit, not allocated.
  const std::string huge = kRegressions + "/features-vlen-8gb.h5";
  try {
    cae::Hdf5Reader r(huge);
    FAIL() << "opened a file with an 8 GB string attribute";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupted HDF5"), std::string::npos) << e.what();
  }
}

TEST(Reliability, ProbeAcceptsGoodFilesAndLeavesNoChildren) {
  char tmpl[] = "/tmp/cae-rel-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/good.h5";
  std::vector<float> x(64 * 5);
  {
    cae::Hdf5Writer w(path);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * float(i % 17) - 1.0f;
    w.write("/train/features", x.data(), {5, 64}, {2, 1});
    w.set_attr("/", "format", "ae-features");
    w.set_attr("/", "class_names", std::vector<std::string>{"a", "b"});
    w.close();
  }
  for (int i = 0; i < 20; ++i) {
    cae::Hdf5Reader r(path);
    EXPECT_EQ(r.attr_string("/", "format"), "ae-features");
    EXPECT_EQ(r.read<float>("/train/features", {5, 64}), x);
  }
  EXPECT_TRUE(no_children_left());
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// Past `ulimit -f` a tool used to die by SIGXFSZ (leaving its temporary file), and with the
// signal ignored it crashed at exit inside HDF5's atexit clean-up of the failed file.
// Now the write fails and the error is a normal exception. (The exit-time half is checked
// end to end by reliability.bats, "ulimit -f" and "full disk": real tools exit through
// exit(). Here the child leaves with _exit: in a fork of this multi-threaded test process
// LeakSanitizer would report the thread-local data of threads the child does not have.)
TEST(Reliability, FileSizeLimitIsAnErrorNotACrash) {
  char tmpl[] = "/tmp/cae-rel-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string final_path = dir + "/big.h5";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The parent's OpenMP threads (earlier tests') do not exist in a forked child, and
    // libgomp waits for them at the child's first parallel region (the writer's checksums):
    // one thread here, as a tool that never forks has its own.
    omp_set_num_threads(1);
    struct rlimit lim = {64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &lim);
    cae::install_cleanup_signal_handlers();
    int code = 3;
    try {
      cae::AtomicOutput out(final_path);
      cae::Hdf5Writer w(out.temp_path(), final_path);
      std::vector<float> x(1 << 20);
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 1000) * 0.5f;
      w.write("/x", x.data(), {uint64_t(x.size())});
      w.close();
      out.commit();
    } catch (const std::runtime_error& e) {
      code = std::string(e.what()).find("disk full or file size limit") != std::string::npos ? 0 : 4;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the write succeeded, 4: another error";
  DIR* d = opendir(dir.c_str());
  int entries = 0;
  while (dirent* e = readdir(d)) entries += e->d_name[0] != '.' || std::string(e->d_name).find(".big.h5.tmp") == 0;
  closedir(d);
  EXPECT_EQ(entries, 0) << "the output or its temporary file was left behind";
  rmdir(dir.c_str());
}

TEST(Reliability, CifarBatchRegressionsParseOrFailCleanly) {
  for (const std::string& path : regression_files(".bin")) {
    SCOPED_TRACE(path);
    std::ifstream f(path, std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    fuzz::parse_batch_tiled(data.data(), data.size());
  }
}

}  // namespace

namespace {

// A dataset declared large but never written (no chunk allocated) reads back as fill
// values: readers must refuse it before they size a buffer from its shape.
TEST(Reliability, DatasetThatWasNeverWrittenIsRefusedBeforeAllocation) {
  char tmpl[] = "/tmp/cae-rel-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/hollow.h5";
  {
    cae::Hdf5Writer w(path);
    w.create<uint8_t>("/train/labels", {uint64_t(1) << 36}, {4096, 0});  // 64 GiB declared, nothing written
    w.set_attr("/", "format", "cifar10-dataset");
    w.close();
  }
  cae::Hdf5Reader r(path);
  try {
    r.read<uint8_t>("/train/labels");
    FAIL() << "read a dataset that was never written";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/train/labels has shape [68719476736] but not all of its data was ever written"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cae::DatasetReader d(path), std::runtime_error);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// An svm-model whose dual coefficients hold a NaN used to evaluate "fine" (46 % accuracy
// on garbage votes); it is refused when read.
TEST(Reliability, SvmModelWithNaNIsRefused) {
  char tmpl[] = "/tmp/cae-rel-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/svm.h5";
  svm::ModelFile f;
  const int D = 3;
  f.scaler.mean = {0.5, -1.0, 2.0};
  f.scaler.scale = {1.0, 2.0, 0.5};
  f.feature_mask = {1, 1, 1};
  f.model.kernel = svm::KernelType::rbf;
  f.model.gamma = 0.5;
  f.model.dim = D;
  f.model.classes = {0, 1};
  f.model.n_support = {1, 1};
  f.model.support_vectors = {0.1f, 0.2f, 0.3f, -0.1f, -0.2f, -0.3f};
  f.model.dual_coef = {1.0, -1.0};
  f.model.rho = {0.25};
  f.model.support_indices = {0, 1};
  f.class_names = {"a", "b"};
  auto write = [&](const svm::ModelFile& m) {
    cae::Hdf5Writer w(path);
    svm::write_model_file(w, m);
    w.set_attr("/", "format", "svm-model");
    w.close();
  };
  write(f);
  EXPECT_EQ(svm::read_model_file(path).model.rho[0], 0.25);  // the good model reads back
  f.model.dual_coef[1] = std::nan("");
  write(f);
  try {
    svm::read_model_file(path);
    FAIL() << "read a model with a NaN dual coefficient";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/svm/dual_coef holds NaN or Inf"), std::string::npos) << e.what();
  }
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// ---- issue 19 ------------------------------------------------------------------------

using cae_test::TempDir;

void write_small(const std::string& path) {
  cae::Hdf5Writer w(path);
  const std::vector<float> x = {0.25f, -1.5f, 3.0f, 7.0f};
  w.write("/x", x);
  w.set_attr("/", "format", "ae-features");
  w.close();
}

std::string usage_error(const std::vector<cae::FileArg>& in, const std::vector<cae::FileArg>& out) {
  try {
    cae::check_distinct(in, out);
  } catch (const cae::UsageError& e) {
    return e.what();
  }
  return "";
}

// Class 1: an output that is an input under any spelling, or another output, is refused
// (7 aliasing cases, 2 distinct controls).
TEST(Reliability, OutputThatAliasesAnInputOrAnotherOutputIsRefused) {
  TempDir d;
  const std::string in = d.path + "/in.h5";
  write_small(in);
  ASSERT_EQ(symlink(in.c_str(), (d.path + "/link.h5").c_str()), 0);
  ASSERT_EQ(link(in.c_str(), (d.path + "/hard.h5").c_str()), 0);
  mkdir((d.path + "/sub").c_str(), 0755);
  const std::vector<cae::FileArg> inputs = {{"--features", in}};
  for (const std::string& alias : {in, d.path + "/./in.h5", d.path + "/sub/../in.h5", d.path + "/link.h5",
                                   d.path + "/hard.h5"}) {
    const std::string msg = usage_error(inputs, {{"-o", alias}});
    EXPECT_NE(msg.find("is the input file of --features"), std::string::npos) << alias << ": " << msg;
  }
  // Two outputs on one file, before it exists: compared by resolved path.
  const std::string msg = usage_error({}, {{"-o", d.path + "/new.h5"}, {"--export-libsvm", d.path + "/sub/../new.h5"}});
  EXPECT_NE(msg.find("name the same file"), std::string::npos) << msg;
  EXPECT_NE(usage_error({}, {{"-o", d.path + "/a"}, {"--export-libsvm", d.path + "/a"}}), "");
  // Controls: other names are fine.
  EXPECT_EQ(usage_error(inputs, {{"-o", d.path + "/out.h5"}, {"--export-libsvm", d.path + "/out.txt"}}), "");
  EXPECT_EQ(usage_error(inputs, {{"-o", d.path + "/sub/in.h5"}}), "");
  EXPECT_TRUE(std::ifstream(in).good());  // nothing was touched
}

// Class 1: each output has its own temporary name; a second live output on one file is
// refused at once.
TEST(Reliability, EveryOutputHasItsOwnTemporaryName) {
  TempDir d;
  cae::AtomicOutput a(d.path + "/a.h5"), b(d.path + "/b.h5");
  EXPECT_NE(a.temp_path(), b.temp_path());
  EXPECT_EQ(cae::temp_path_for(d.path + "/x", 1) == cae::temp_path_for(d.path + "/x", 2), false);
  EXPECT_THROW(cae::AtomicOutput(d.path + "/./a.h5"), cae::UsageError);
}

// Class 6: a name the file system accepts works, however long; one it refuses fails
// before any work (2 cases + the commit of the longest name).
TEST(Reliability, LongOutputNamesFitOrFailUpFront) {
  TempDir d;
  const long name_max = pathconf(d.path.c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 20);
  const std::string longest = d.path + "/" + std::string(size_t(name_max) - 3, 'n') + ".h5";
  {
    cae::AtomicOutput out(longest);
    const std::string temp_name = out.temp_path().substr(d.path.size() + 1);
    EXPECT_LE(long(temp_name.size()), name_max) << temp_name;
    std::ofstream(out.temp_path()) << "data";
    out.commit();
  }
  EXPECT_TRUE(std::ifstream(longest).good());
  const std::string too_long = d.path + "/" + std::string(size_t(name_max) + 1, 'n');
  try {
    cae::check_output_path(too_long);
    FAIL() << "accepted a name longer than NAME_MAX";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the file system allows " + std::to_string(name_max)), std::string::npos)
        << e.what();
  }
}

// Class 3: a small file whose dataset claims 2^31 rows is refused by shape() itself, the
// call every reader sizes buffers from (chunked never written, contiguous never written).
TEST(Reliability, ClaimedShapeWithoutDataIsRefusedByShape) {
  TempDir d;
  const std::string chunked = d.path + "/c.h5", contiguous = d.path + "/k.h5";
  {
    cae::Hdf5Writer w(chunked);
    w.create<float>("/train/features", {uint64_t(1) << 31, 256}, {64, 0});
    w.close();
  }
  {
    cae::Hdf5Writer w(contiguous);
    w.create<float>("/train/features", {uint64_t(1) << 31, 256});
    w.close();
  }
  for (const std::string& path : {chunked, contiguous}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_LT(st.st_size, 64 * 1024) << path;
    cae::Hdf5Reader r(path);
    try {
      r.shape("/train/features");
      ADD_FAILURE() << path << ": shape() of a hollow dataset";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("/train/features has shape [2147483648,256]"), std::string::npos) << e.what();
    }
    std::vector<float> row(256);
    EXPECT_THROW(r.read_rows<float>("/train/features", 0, 1, row.data()), std::runtime_error);
  }
}

// Class 4: data outside the file (external link, external storage, virtual dataset; a
// link to a FIFO) is refused by the probe and by the reader with the probe off; a FIFO
// given as the file is refused without opening it (5 files x 2 modes).
TEST(Reliability, ExternalLinksStorageAndVirtualDatasetsAreRefused) {
  TempDir d;
  const std::string other = d.path + "/other.h5", raw = d.path + "/raw.bin", fifo = d.path + "/fifo";
  write_small(other);
  std::ofstream(raw, std::ios::binary).write("\1\2\3\4\5\6\7\10\11\12\13\14\15\16\17\20", 16);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto make = [&](const std::string& name, const std::function<void(hid_t)>& add) {
    const std::string path = d.path + "/" + name;
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    add(f);
    H5Fclose(f);
    return path;
  };
  const std::string elink = make("elink.h5", [&](hid_t f) { H5Lcreate_external(other.c_str(), "/x", f, "x", H5P_DEFAULT, H5P_DEFAULT); });
  const std::string elink_fifo =
      make("efifo.h5", [&](hid_t f) { H5Lcreate_external(fifo.c_str(), "/x", f, "x", H5P_DEFAULT, H5P_DEFAULT); });
  const std::string external = make("external.h5", [&](hid_t f) {
    hsize_t n = 4;
    hid_t space = H5Screate_simple(1, &n, nullptr), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, raw.c_str(), 0, 16);
    H5Dclose(H5Dcreate2(f, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Pclose(dcpl), H5Sclose(space);
  });
  const std::string virt = make("virtual.h5", [&](hid_t f) {
    hsize_t n = 4;
    hid_t space = H5Screate_simple(1, &n, nullptr), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_virtual(dcpl, space, other.c_str(), "/x", space);
    H5Dclose(H5Dcreate2(f, "x", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Pclose(dcpl), H5Sclose(space);
  });
  const struct {
    std::string path;
    const char* says;
  } cases[] = {{elink, "/x is an external link to "},
               {elink_fifo, "/x is an external link to"},
               {external, "dataset /x keeps its data in an external file"},
               {virt, "dataset /x is a virtual dataset"},
               {fifo, "is not a regular file"}};
  for (bool probe : {true, false}) {
    cae::set_hdf5_metadata_probe(probe);
    for (const auto& c : cases) {
      try {
        cae::Hdf5Reader r(c.path);
        ADD_FAILURE() << c.path << " was opened (probe " << probe << ")";
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).rfind(c.path + ": ", 0), 0u) << e.what();
      }
    }
  }
  cae::set_hdf5_metadata_probe(true);
  cae::Hdf5Reader good(other);  // the control
  EXPECT_EQ(good.read<float>("/x")[3], 7.0f);
  EXPECT_TRUE(no_children_left());
}

// Class 5: thread counts and memory are bounded by the machine; the OpenBLAS thread count
// under an address-space limit leaves half of it to the data (5 cases).
TEST(Reliability, ResourceOptionsAreBoundedByTheMachine) {
  EXPECT_GE(cae::max_threads(), 64);
  EXPECT_LE(cae::max_threads(), 1024);
  EXPECT_NO_THROW(cae::check_thread_count("--threads", cae::max_threads()));
  EXPECT_THROW(cae::check_thread_count("--threads", 100000), cae::UsageError);
  EXPECT_THROW(cae::check_thread_count("--threads", -1), cae::UsageError);
  EXPECT_GT(cae::usable_memory_bytes(), uint64_t(1) << 20);
  EXPECT_EQ(cae::blas_threads_for_address_space(1024, 64), 1);   // 1 GiB: one 128 MB buffer
  EXPECT_EQ(cae::blas_threads_for_address_space(4096, 64), 9);   // (4096 - 256) / 2 / 200
  EXPECT_EQ(cae::blas_threads_for_address_space(65536, 8), 8);   // never more than the cores
  EXPECT_EQ(cae::blas_threads_for_address_space(200, 8), 1);
}

}  // namespace
