// A fresh folder for one test's files (/tmp/PREFIX-XXXXXX), removed with everything in it
// when the object goes out of scope.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace cae_test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "cae-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    if (mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
    path = name.data();
  }
  ~TempDir() {
    std::error_code ignored;  // a test that failed half-way may have left anything there
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path + "/" + name; }

  std::string path;
};

}  // namespace cae_test
