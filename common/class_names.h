// What a class name may be, decided once where names enter the toolkit (cifar-convert's
// sources, the dataset reader, the features reader), so that every tool after them holds
// names that print, weigh (svm-fit --class-weight NAME:W) and export (JSON, HDF5 UTF-8
// strings) the same way:
//   * non-empty, no NUL byte (a C string, an HDF5 variable-length string and a terminal
//     would each cut it there), at most kMaxClassNameBytes bytes (as UTF-8);
//   * valid UTF-8: a byte that is not part of a valid UTF-8 sequence is read as Latin-1 (the
//     encoding of folder names in old archives), i.e. it becomes U+0080..U+00FF, so
//     "caf\xe9" is "café" ("caf\xc3\xa9");
//   * distinct after that: two names that became one are refused, naming both as they were.
// docs/RELIABILITY.md, class 4.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace cae {

constexpr size_t kMaxClassNameBytes = 255;

// `bytes` as valid UTF-8: valid sequences kept, every other byte b as the code point U+00b
// (two bytes). Total: never fails, and valid UTF-8 comes back unchanged.
std::string utf8_or_latin1(const std::string& bytes);

// The class names as the toolkit holds them (utf8_or_latin1 of each), in the same order;
// fails "<file>: <problem>" (cae::fail_file) naming the class for an empty name, a NUL byte,
// a name longer than kMaxClassNameBytes, or two names that are one after the conversion.
std::vector<std::string> checked_class_names(const std::vector<std::string>& names, const std::string& file);

}  // namespace cae
