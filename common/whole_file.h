// Input files read whole into memory: a plain file, or the wanted members of a .tar(.gz)
// archive. The readers of the CIFAR binary distributions and of single images share them;
// each says which sizes it accepts, and is asked before any memory is allocated.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cae {

// What is wrong with an input of `bytes` bytes, completing "<name> ..." ("is larger than
// 1 GB: ..."); "" when the size is acceptable.
using SizeProblem = std::function<std::string(int64_t bytes)>;

// The bytes of `path`, which must be a regular file of a size `size_problem` accepts.
// Errors name the file: "cannot open: ...", "is not a regular file", the size problem,
// "short read".
std::vector<uint8_t> read_regular_file(const std::string& path, const SizeProblem& size_problem);

// The members of the archive `path` whose base names are in `wanted`, by base name. A
// member's declared size must satisfy `size_problem` (the message names the member); its
// data are read as bounded_read.h reads them, so a false header costs no memory.
std::map<std::string, std::vector<uint8_t>> read_archive_members(const std::string& path,
                                                                 const std::vector<std::string>& wanted,
                                                                 const SizeProblem& size_problem);

}  // namespace cae
