// An svm model file's class_names pass the class-name rule when it is loaded
// (common/class_names.h; docs/RELIABILITY.md, round 4, class 4): a model is an input from
// outside like a features file, so a duplicate, empty, NUL-bearing or over-long name is
// refused naming the model file, and a byte that is not UTF-8 is read as Latin-1.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/hdf5_io.h"
#include "kernels/svm/model_file.h"
#include "tests/support/svm_shortcuts.h"
#include "tests/support/temp_dir.h"

namespace {

// A two-class RBF model of 3 features, its class_names `names` as the toolkit's writer
// stores strings (variable-length).
svm::ModelFile two_class_model(const std::vector<std::string>& names) {
  svm::ModelFile f;
  f.scaler.mean = {0.5, -1.0, 2.0};
  f.scaler.scale = {1.0, 2.0, 0.5};
  f.feature_mask = {1, 1, 1};
  f.model.kernel = svm::KernelType::rbf;
  f.model.gamma = 0.5;
  f.model.dim = 3;
  f.model.classes = {0, 1};
  f.model.n_support = {1, 1};
  f.model.support_vectors = {0.1f, 0.2f, 0.3f, -0.1f, -0.2f, -0.3f};
  f.model.dual_coef = {1.0, -1.0};
  f.model.rho = {0.25};
  f.model.support_indices = {0, 1};
  f.class_names = names;
  return f;
}

void write_model(const std::string& path, const std::vector<std::string>& names) {
  cae::Hdf5Writer w(path);
  svm::write_model_file(w, two_class_model(names));
  w.set_attr("/", "format", "svm-model");
  w.close();
}

// Replaces the root class_names by fixed-length, null-padded strings (as h5py stores a
// numpy 'S' array): the one layout in which a NUL inside a name reaches the reader.
void set_fixed_names(const std::string& path, const std::vector<std::string>& names) {
  size_t width = 1;
  for (const std::string& n : names) width = std::max(width, n.size() + 1);
  std::string buf(width * names.size(), '\0');
  for (size_t i = 0; i < names.size(); ++i) buf.replace(i * width, names[i].size(), names[i]);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  if (H5Aexists(file, "class_names") > 0) {
    ASSERT_GE(H5Adelete(file, "class_names"), 0);
  }
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, width);
  H5Tset_strpad(type, H5T_STR_NULLPAD);
  const hsize_t n = names.size();
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t attr = H5Acreate2(file, "class_names", type, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(attr, 0);
  ASSERT_GE(H5Awrite(attr, type, buf.data()), 0);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(file);
}

}  // namespace

TEST(ModelFileNames, GoodAndLatin1NamesReadAsTheRuleSays) {
  cae_test::TempDir dir("cae-model-names");
  const std::string path = dir.file("svm.h5");
  write_model(path, {"north", "\xe7\x8c\xab"});  // UTF-8 kept
  EXPECT_EQ(svm::read_model_file(path).class_names, (std::vector<std::string>{"north", "\xe7\x8c\xab"}));
  write_model(path, {"caf\xe9", "dog"});  // a Latin-1 byte is its code point: café
  EXPECT_EQ(svm::read_model_file(path).class_names, (std::vector<std::string>{"caf\xc3\xa9", "dog"}));
  set_fixed_names(path, {"caf\xe9", "\xff"});  // and so in fixed-length strings
  EXPECT_EQ(svm::read_model_file(path).class_names, (std::vector<std::string>{"caf\xc3\xa9", "\xc3\xbf"}));
  write_model(path, {std::string(255, 'a'), "b"});  // the longest name allowed
  EXPECT_EQ(svm::read_model_file(path).class_names[0].size(), 255u);
  write_model(path, {});  // files without names still read
  EXPECT_TRUE(svm::read_model_file(path).class_names.empty());
}

TEST(ModelFileNames, DuplicateNulEmptyAndLongNamesAreRefusedNamingTheFile) {
  cae_test::TempDir dir("cae-model-names");
  const std::string path = dir.file("svm.h5");
  struct Case {
    std::vector<std::string> names;
    bool fixed;        // stored as fixed-length strings (set_fixed_names)
    std::string says;  // in the message, after "<path>: "
  };
  const std::vector<Case> cases = {
      {{"cat", "cat"}, false, "are one class name"},
      {{"caf\xe9", "caf\xc3\xa9"}, false, "are one class name"},  // Latin-1 beside its UTF-8 twin
      {{std::string("a\0b", 3), "a"}, true, "a class name may not hold a NUL byte"},
      {{"", "b"}, true, "has an empty name"},
      {{std::string(256, 'a'), "b"}, false, "a class name is at most 255 bytes"},
      {{std::string(128, '\xe9'), "b"}, false, "a class name is at most 255 bytes"},  // 256 as UTF-8
  };
  for (const Case& c : cases) {
    write_model(path, {"x", "y"});
    if (c.fixed) set_fixed_names(path, c.names);
    else write_model(path, c.names);
    const std::string message = svm_test::model_file_refusal(path);
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}
