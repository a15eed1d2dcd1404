// A group's files as common/group.cpp writes them, for the tests that plant their own in a
// launch folder (test_group_launch, test_nccl_id_exchange): one copy of the format, so the
// two cannot drift from each other.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/group.h"

namespace cae_test {

constexpr uint32_t kGroupFileMagic = 0x43414547;  // common/group.cpp's kGroupFileMagic

inline void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A rank's file as GroupExchange::publish writes it for a launch with `token`: the header,
// then the payload's bytes.
inline std::vector<unsigned char> rank_file(const std::string& token, int32_t rank,
                                            const std::vector<unsigned char>& payload) {
  cae::ByteWriter w;
  w.put<uint32_t>(kGroupFileMagic);
  w.put_vector(std::vector<char>(token.begin(), token.end()));
  w.put<int32_t>(rank);
  std::vector<unsigned char> bytes = w.bytes();
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

}  // namespace cae_test
