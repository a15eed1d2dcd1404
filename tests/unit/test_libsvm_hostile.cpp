// libsvm's text formats from outside the toolkit: every damaged or hostile model and data
// file is refused with one message naming the file, the line and the problem (never a crash,
// never a model that predicts something), and a file whose dense form would not fit is
// refused with the bytes it would need and the limit it is over — `ulimit -v` included —
// before anything is allocated. The committed fuzz regressions (tests/fuzz/regressions/
// *.model, *.libsvm) are replayed here.
#include <dirent.h>
#include <gtest/gtest.h>
#include <libsvm/svm.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/libsvm_data.h"
#include "common/memory_limit.h"
#include "kernels/svm/classifier.h"
#include "kernels/svm/libsvm_format.h"
#include "tests/fuzz/fuzz_memory_limit.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;

void quiet_libsvm(const char*) {}

// A 3-class rbf model trained by libsvm itself on random clouds, as svm_save_model writes
// it (probA/probB included), and rows to predict.
struct TrainedModel {
  std::string text;
  std::vector<std::vector<svm_node>> test_rows;
  std::vector<float> test_dense;  // [n_test, kDim]
  static constexpr int kDim = 4;
};

TrainedModel train_model(const TempDir& dir) {
  svm_set_print_string_function(quiet_libsvm);
  std::mt19937 rng(17);
  std::normal_distribution<double> noise(0, 0.6);
  const int labels[] = {7, -2, 4};
  const double centre[3][TrainedModel::kDim] = {{1, 1, 0, 0}, {-1, 0, 1, 0}, {0, -1, 0, 1}};
  std::vector<std::vector<svm_node>> rows;
  std::vector<double> y;
  TrainedModel m;
  for (int i = 0; i < 150; ++i) {
    const int c = i % 3;
    std::vector<svm_node> row;
    std::vector<float> dense;
    for (int f = 0; f < TrainedModel::kDim; ++f) {
      const double x = centre[c][f] + noise(rng);
      row.push_back({f + 1, x});
      dense.push_back(static_cast<float>(x));
    }
    row.push_back({-1, 0});
    if (i < 120) {
      rows.push_back(row);
      y.push_back(labels[c]);
    } else {
      m.test_rows.push_back(row);
      m.test_dense.insert(m.test_dense.end(), dense.begin(), dense.end());
    }
  }
  std::vector<svm_node*> ptrs;
  for (auto& r : rows) ptrs.push_back(r.data());
  svm_problem prob{static_cast<int>(rows.size()), y.data(), ptrs.data()};
  svm_parameter p{};
  p.svm_type = C_SVC, p.kernel_type = RBF, p.gamma = 0.4, p.C = 2;
  p.cache_size = 20, p.eps = 1e-4, p.shrinking = 1, p.probability = 1;
  svm_model* trained = svm_train(&prob, &p);
  const std::string path = dir.file("trained.model");
  EXPECT_EQ(svm_save_model(path.c_str(), trained), 0);
  svm_free_and_destroy_model(&trained);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  m.text = ss.str();
  return m;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) out.push_back(line);
  return out;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The model with its header line `key ...` replaced by `replacement` (removed when empty).
std::string with_header(const std::string& text, const std::string& key, const std::string& replacement) {
  std::vector<std::string> lines = lines_of(text), out;
  for (const std::string& l : lines) {
    if (l.rfind(key + " ", 0) == 0) {
      if (!replacement.empty()) out.push_back(replacement);
    } else {
      out.push_back(l);
    }
  }
  return join(out);
}

// The model with its support-vector line `v` (0-based) replaced.
std::string with_sv_line(const std::string& text, size_t v, const std::string& replacement) {
  std::vector<std::string> lines = lines_of(text);
  const size_t sv = std::find(lines.begin(), lines.end(), "SV") - lines.begin();
  lines.at(sv + 1 + v) = replacement;
  return join(lines);
}

// The 1-based line number of support vector `v` (0-based).
std::string sv_line_no(const std::string& text, size_t v) {
  const std::vector<std::string> lines = lines_of(text);
  return std::to_string(std::find(lines.begin(), lines.end(), "SV") - lines.begin() + 2 + static_cast<long>(v));
}

std::string header_value(const std::string& text, const std::string& key) {
  for (const std::string& l : lines_of(text))
    if (l.rfind(key + " ", 0) == 0) return l.substr(key.size() + 1);
  return "";
}

std::string refusal(const std::string& path) {
  try {
    svm::import_libsvm_model(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// The unmodified model reads and predicts as libsvm does: the control for every case below.
TEST(LibsvmHostileModel, TheTrainedModelReadsAndPredictsAsLibsvm) {
  TempDir dir;
  const TrainedModel t = train_model(dir);
  const std::string path = dir.file("good.model");
  std::ofstream(path) << t.text;
  svm_model* lm = svm_load_model(path.c_str());
  ASSERT_NE(lm, nullptr);
  const svm::Classifier clf(svm::import_libsvm_model(path));
  ASSERT_TRUE(clf.has_probability());
  const int64_t n = static_cast<int64_t>(t.test_rows.size());
  std::vector<float> x = t.test_dense;
  const std::vector<double> dec = clf.decision_values(x.data(), n);
  const std::vector<int32_t> pred = clf.vote(dec, n);
  int same = 0;
  for (int64_t i = 0; i < n; ++i)
    same += std::stoi(clf.file().class_names[pred[i]]) == static_cast<int>(svm_predict(lm, t.test_rows[i].data()));
  EXPECT_GE(same, n - 1);
  svm_free_and_destroy_model(&lm);
}

// Each damage that made svm_load_model (or the conversion after it) read out of bounds, and
// each number svm-fit would refuse as an option, is refused naming the line and the field.
TEST(LibsvmHostileModel, DamagedHeadersAndLinesAreRefusedByLine) {
  TempDir dir;
  const TrainedModel t = train_model(dir);
  const std::string m = t.text;
  std::istringstream counts(header_value(m, "nr_sv"));
  int a = 0, b = 0, c = 0;
  counts >> a >> b >> c;
  const std::string total = header_value(m, "total_sv");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with_header(m, "rho", ""), "has no 'rho' line before 'SV'"},
      {with_header(m, "nr_sv", "nr_sv " + std::to_string(a) + " " + std::to_string(b) + " " + std::to_string(c + 5)),
       "nr_sv adds up to " + std::to_string(a + b + c + 5) + ", total_sv says " + total},
      {with_header(m, "nr_sv", "nr_sv " + std::to_string(a + b + 3) + " -3 " + std::to_string(c)),
       "nr_sv: '-3' is not an integer in 0.." + total},
      {with_header(m, "nr_sv", ""), "has no 'nr_sv' line"},
      {with_header(m, "label", ""), "has no 'label' line"},
      {with_header(m, "total_sv", "total_sv -4"), "total_sv: '-4' is not an integer in 1..2147483647"},
      {with_sv_line(m, 1, "0.25"),
       "line " + sv_line_no(m, 1) + ": support vector 2 has 1 coefficients, 3 classes need 2"},
      {with_sv_line(m, 0, ""), "total_sv " + total + " but "},
      {with_sv_line(m, 2, "0.5 nan 1:0.5"),
       "line " + sv_line_no(m, 2) + ": support vector 3 coefficient: 'nan' is not finite"},
      {with_sv_line(m, 2, "0.5 0.1 2:0.5 1:1"),
       "line " + sv_line_no(m, 2) + ": support vector 3: index 1 after 2 (indices must ascend)"},
      {with_sv_line(m, 2, "0.5 0.1 0:0.5"), "support vector 3 index: '0' is not an integer in 1.."},
      {with_sv_line(m, 2, "0.5 0.1 1:1e60"), "support vector 3: '1:1e60' is not a finite float32 value"},
      {with_sv_line(m, 2, "0.5 0.1 1:0.5 3"), "'3' is not index:value"},
      {m + "0.1 0.2 1:1\n", "more support vectors than total_sv " + total},
      {with_header(m, "gamma", "gamma -0.5"), "line 3: gamma -0.5 is not > 0"},
      {with_header(m, "gamma", "gamma 0"), "gamma 0 is not > 0"},
      {with_header(m, "gamma", "gamma nan"), "gamma: 'nan' is not finite"},
      {with_header(m, "gamma", "gamma inf"), "gamma: 'inf' is not finite"},
      {with_header(m, "gamma", ""), "has no 'gamma' line"},
      {with_header(m, "rho", "rho nan 0.1 0.2"), "rho: 'nan' is not finite"},
      {with_header(m, "rho", "rho 0.1 0.2"), "rho lists 2 values, this model needs 3"},
      {with_header(m, "probA", "probA -1 inf -1"), "probA: 'inf' is not finite"},
      {with_header(m, "probB", "probB 0.1 nan 0"), "probB: 'nan' is not finite"},
      {with_header(m, "probB", ""), "has no 'probB' line"},
      {with_header(m, "label", "label 7 -2 7"), "label 7 names two classes"},
      {with_header(m, "label", "label 7 -2 4.5"), "label: '4.5' is not an integer"},
      {with_header(m, "nr_class", "nr_class 1"), "nr_class: '1' is not an integer in 2..65536"},
      {with_header(m, "nr_class", "nr_class 70000"), "nr_class: '70000' is not an integer in 2..65536"},
      {with_header(m, "nr_class", "nr_class 2"), "rho lists 3 values, this model needs 1"},
      {with_header(m, "svm_type", "svm_type nu_svc"), "line 1: svm_type nu_svc is not supported: only c_svc"},
      {with_header(m, "svm_type", "svm_type one_class"), "svm_type one_class is not supported"},
      {with_header(m, "svm_type", "svm_type c_svc_x"), "svm_type is not one libsvm type"},
      {with_header(m, "kernel_type", "kernel_type polynomial"), "line 2: kernel_type polynomial is not supported"},
      {with_header(m, "kernel_type", "kernel_type sigmoid"), "kernel_type sigmoid is not supported"},
      {with_header(m, "kernel_type", "kernel_type tanh"), "kernel_type is not one libsvm kernel"},
      {with_header(m, "kernel_type", ""), "has no 'kernel_type' line"},
      {with_header(m, "gamma", "gamma 0.4\ngamma 0.5"), "line 4: 'gamma' again (first on line 3)"},
      {with_header(m, "gamma", "gamma 0.4\nweight 3"), "line 4: unknown header field 'weight'"},
      {with_header(m, "svm_type", ""), "is not a libsvm model file (it does not start with 'svm_type')"},
      {m.substr(0, m.find("\nSV\n") + 1), "ends before its 'SV' line"},
  };
  int i = 0;
  for (const auto& [text, problem] : cases) {
    const std::string path = dir.file("bad" + std::to_string(i++) + ".model");
    std::ofstream(path) << text;
    const std::string what = refusal(path);
    EXPECT_NE(what.find(path + ": "), std::string::npos) << problem << " -> " << what;
    EXPECT_NE(what.find(problem), std::string::npos) << "expected '" << problem << "', got '" << what << "'";
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// A model line with index 2·10^9: the dense support vectors would take ~10^11 bytes. The
// refusal names the line, the index and the bytes, before anything of that size exists.
TEST(LibsvmHostileModel, AHugeIndexIsRefusedWithTheLineAndTheBytes) {
  TempDir dir;
  const TrainedModel t = train_model(dir);
  const std::string path = dir.file("huge.model");
  std::ofstream(path) << with_sv_line(t.text, 1, "0.25 0.5 1:0.5 2000000000:1");
  const int64_t l = std::stoll(header_value(t.text, "total_sv"));
  const std::string bytes = std::to_string(int64_t{2000000000} * (4 * l + 17));
  const std::string what = refusal(path);
  EXPECT_NE(what.find("line " + sv_line_no(t.text, 1) + ": index 2000000000: " + std::to_string(l) +
                      " support vectors of 2000000000 features (dense float32) need " + bytes + " bytes"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("more than half of"), std::string::npos) << what;
}

// A token of a megabyte (and control bytes) is quoted as a short escaped prefix.
TEST(LibsvmHostileModel, AHugeTokenIsQuotedAsAShortEscapedPrefix) {
  TempDir dir;
  const TrainedModel t = train_model(dir);
  const std::string path = dir.file("token.model");
  std::ofstream(path) << with_header(t.text, "gamma", "gamma \x1b[31m" + std::string(1 << 20, '7'));
  const std::string what = refusal(path);
  EXPECT_NE(what.find("gamma: '\\x1B[31m7777"), std::string::npos) << what.substr(0, 200);
  EXPECT_NE(what.find("'... (1048581 bytes) is not a number"), std::string::npos) << what.substr(0, 200);
  EXPECT_LT(what.size(), 300u);
  EXPECT_EQ(cae::quoted_token("1:0.5"), "'1:0.5'");
}

// ---- memory limits ------------------------------------------------------------------------------

namespace {

// Runs `body` in a child whose address space may grow `spare` bytes past what it already
// maps (as `ulimit -v` does); the body's return is the child's exit status.
int with_address_space_limit(uint64_t spare, const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    fuzz::limit_address_space(spare);
    int code = 99;
    try {
      code = body();
    } catch (...) {
      code = 98;
    }
    _exit(code);  // see test_reliability.cpp: no exit handlers in a fork of this process
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

std::string wide_rows(const TempDir& dir, int rows, int index) {
  const std::string path = dir.file("wide" + std::to_string(index) + ".libsvm");
  std::ofstream out(path);
  // The last row alone sets the width: the message names its line.
  for (int r = 0; r < rows; ++r)
    out << (r % 2 ? "1" : "-1") << " 1:" << 0.5 + r << " " << (r + 1 < rows ? 2 : index) << ":" << r + 1 << "\n";
  return path;
}

}  // namespace

// Under `ulimit -v` the headroom is the limit less what is mapped already, and it is what
// binds: a 3 KB data file whose dense matrix needs 400 MB is refused with the line, the
// bytes and "ulimit -v" in a process with 256 MB to spare; one needing 40 MB is read.
TEST(LibsvmHostileData, UlimitVIsHonouredBeforeTheDenseMatrixIsAllocated) {
  TempDir dir;
  const std::string big = wide_rows(dir, 100, 1000000), small = wide_rows(dir, 100, 100000);
  const uint64_t spare = uint64_t{256} << 20;
  EXPECT_EQ(with_address_space_limit(spare,
                                     [&] {
                                       const cae::MemoryHeadroom h = cae::memory_headroom();
                                       if (h.limit.find("ulimit -v") == std::string::npos) return 1;
                                       if (h.bytes > spare || h.bytes < spare / 2) return 2;
                                       try {
                                         cae::read_libsvm_data(big);
                                         return 3;
                                       } catch (const std::runtime_error& e) {
                                         const std::string what = e.what();
                                         const std::string want =
                                             big + ": line 100: index 1000000: 100 rows of 1000000 features (dense "
                                                   "float32) need 400000000 bytes (381 MiB), more than half of what "
                                                   "ulimit -v (RLIMIT_AS) leaves this process (";
                                         if (what.rfind(want, 0) != 0) return 4;
                                       }
                                       const cae::LibsvmData d = cae::read_libsvm_data(small);
                                       return d.dim == 100000 && d.X[99 * int64_t{100000} + 99999] == 100.0f ? 0 : 5;
                                     }),
            0)
      << "1: the limit is not named, 2: the headroom is not the spare, 3: read, 4: another message, 5: wrong data";
}

// The same file without a limit of its own is measured against physical memory and the
// cgroup: 100 rows of 10^9 features (400 GB) are refused on any machine, naming the line.
TEST(LibsvmHostileData, ADeclaredWidthBeyondTheMachineIsRefusedByLine) {
  TempDir dir;
  const std::string path = wide_rows(dir, 100, 1000000000);
  try {
    cae::read_libsvm_data(path);
    ADD_FAILURE() << "read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 100: index 1000000000: 100 rows of 1000000000 features (dense float32) "
                                         "need 400000000000 bytes"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(dir.file("token.libsvm")) << "1 1:0.5 " << std::string(100000, '9') << "\n";
  try {
    cae::read_libsvm_data(dir.file("token.libsvm"));
    ADD_FAILURE() << "read";
  } catch (const std::runtime_error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << "a 100 kB token quoted whole";
    EXPECT_NE(std::string(e.what()).find("... (100000 bytes) is not index:value"), std::string::npos) << e.what();
  }
}

// A model whose dense support vectors need 800 MB, in a process with 256 MB to spare: the
// same refusal, from the model's line.
TEST(LibsvmHostileModel, UlimitVIsHonouredForTheSupportVectors) {
  TempDir dir;
  const TrainedModel t = train_model(dir);
  const std::string path = dir.file("wide.model");
  const int64_t l = std::stoll(header_value(t.text, "total_sv"));
  const int index = static_cast<int>(800000000 / (4 * l));
  std::ofstream(path) << with_sv_line(t.text, 0, "0.25 0.5 1:0.5 " + std::to_string(index) + ":1");
  EXPECT_EQ(with_address_space_limit(uint64_t{256} << 20,
                                     [&] {
                                       const std::string what = refusal(path);
                                       if (what.find("line " + sv_line_no(t.text, 0) + ": index " +
                                                     std::to_string(index)) == std::string::npos)
                                         return 1;
                                       return what.find("ulimit -v") == std::string::npos ? 2 : 0;
                                     }),
            0);
}

// ---- fuzz regressions ---------------------------------------------------------------------------

TEST(LibsvmHostileRegressions, EveryCommittedInputIsRefusedWithoutCrashing) {
  const std::string dir = "tests/fuzz/regressions";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << "run the unit tests from the repository root";
  std::vector<std::string> models, data;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    auto ends = [&](const std::string& s) {
      return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends(".model")) models.push_back(dir + "/" + name);
    if (ends(".libsvm")) data.push_back(dir + "/" + name);
  }
  closedir(d);
  EXPECT_GE(models.size(), 4u);
  EXPECT_GE(data.size(), 1u);
  for (const std::string& path : models) EXPECT_THROW(svm::import_libsvm_model(path), std::runtime_error) << path;
  for (const std::string& path : data) EXPECT_THROW(cae::read_libsvm_data(path), std::runtime_error) << path;
}
