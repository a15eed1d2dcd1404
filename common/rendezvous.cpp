#include "common/rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace cae {

void publish_rendezvous(const std::string& path, const std::vector<unsigned char>& bytes) {
  const std::string temp = path + ".tmp-" + std::to_string(getpid());
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    f.flush();
    if (!f) {
      std::remove(temp.c_str());
      throw std::runtime_error(path + ": cannot write the rendezvous file");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw std::runtime_error(path + ": cannot create the rendezvous file");
  }
}

std::vector<unsigned char> await_rendezvous(const std::string& path, size_t size, double timeout_seconds) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_seconds);
  for (;;) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      if (size_t(st.st_size) != size)
        throw std::runtime_error(path + ": a rendezvous file of " + std::to_string(st.st_size) + " bytes, expected " +
                                 std::to_string(size) + " (another program's file?)");
      std::vector<unsigned char> bytes(size);
      std::ifstream f(path, std::ios::binary);
      f.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(size));
      if (f.gcount() == std::streamsize(size)) return bytes;
    }
    if (clock::now() > deadline)
      throw std::runtime_error(path + ": rank 0 did not publish the rendezvous file within " +
                               std::to_string(int(timeout_seconds)) + " s (is the folder shared by every rank?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace cae
