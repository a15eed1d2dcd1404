// The NCCL id of ae-train's data-parallel group travels through the launch's own folder and
// token (cae::share_nccl_id): NCCL itself needs GPUs, so the exchange is tested here, with
// ranks as threads (the group code uses no OpenMP, and threads need no fork).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/group.h"
#include "tests/support/group_files.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::kGroupFileMagic;
using cae_test::TempDir;
using cae_test::write_file;

constexpr size_t kIdBytes = 128;  // sizeof(ncclUniqueId)

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::vector<unsigned char> some_id(unsigned char salt) {
  std::vector<unsigned char> id(kIdBytes);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<unsigned char>(i * 37 + salt);
  return id;
}

// A launch folder as rank 0 of a launch with `token` makes it, for a world of 2.
void make_launch_folder(const std::string& base, const std::string& token, const std::string& agreement) {
  ASSERT_EQ(mkdir(base.c_str(), 0700), 0);
  cae::ByteWriter w;
  w.put<uint32_t>(kGroupFileMagic);
  w.put<int32_t>(2);
  w.put_vector(std::vector<char>(token.begin(), token.end()));
  w.put_vector(std::vector<char>(agreement.begin(), agreement.end()));
  write_file(base + "/launch", w.bytes());
}

// Rank 0's id file as a launch with `token` writes it.
std::vector<unsigned char> id_file(const std::string& token, const std::vector<unsigned char>& id) {
  return cae_test::rank_file(token, 0, id);
}

TEST(NcclIdExchange, TheRanksOfOneLaunchGetRankZerosIdAndTheFolderGoes) {
  TempDir dir;
  const std::string base = dir.path + "/launch";
  const std::vector<unsigned char> id = some_id(11);
  std::vector<std::vector<unsigned char>> got(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  for (int r = 2; r >= 0; --r)  // the others wait for rank 0's folder
    ranks.emplace_back([&, r] {
      errors[size_t(r)] = error_of([&] {
        got[size_t(r)] = cae::share_nccl_id(r, 3, base, 20, "ae-train --data d.h5", r == 0 ? id : some_id(99), kIdBytes);
        throw std::runtime_error("(no error)");
      });
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[size_t(r)], "(no error)") << "rank " << r;
    EXPECT_EQ(got[size_t(r)], id) << "rank " << r;
  }
  struct stat st {};
  EXPECT_NE(lstat(base.c_str(), &st), 0) << "the launch folder is left behind";
  // One rank needs no exchange and no folder.
  EXPECT_EQ(cae::share_nccl_id(0, 1, base, 1, "", id, kIdBytes), id);
  EXPECT_NE(lstat(base.c_str(), &st), 0);
}

TEST(NcclIdExchange, AnIdOfAnotherLaunchIsRefusedNamingTheFile) {
  TempDir dir;
  // In the launch's folder, rank 0's id file written with another launch's token.
  const std::string base = dir.path + "/launch";
  make_launch_folder(base, "0123456789abcdef", "ae-train --data d.h5");
  const std::string file = base + "/0-nccl-id.rank0";
  write_file(file, id_file("fedcba9876543210", some_id(5)));
  std::string e = error_of([&] { cae::share_nccl_id(1, 2, base, 2, "ae-train --data d.h5", {}, kIdBytes); });
  EXPECT_TRUE(contains(e, file) && contains(e, "another launch")) << e;
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 0) << e;

  // The id file of the old scheme (a plain file at the rendezvous path) is no launch folder:
  // rank 0 does not take the path, and a rank does not read its bytes as an id.
  const std::string old = dir.path + "/old-id";
  write_file(old, some_id(7));
  e = error_of([&] { cae::share_nccl_id(0, 2, old, 1, "", some_id(8), kIdBytes); });
  EXPECT_TRUE(contains(e, old) && contains(e, "is already there")) << e;
  e = error_of([&] { cae::share_nccl_id(1, 2, old, 1, "", {}, kIdBytes); });
  EXPECT_TRUE(contains(e, old) && contains(e, "is not a folder rank 0 made")) << e;

  // A rank of a launch with other options finds a live launch's folder and refuses it; that
  // launch's rank 0 names the rank that never joined and gives up within its timeout.
  const std::string live = dir.path + "/live";
  std::string lead_error;
  std::thread lead([&] { lead_error = error_of([&] { cae::share_nccl_id(0, 2, live, 1, "ae-train --lr 1", some_id(1), kIdBytes); }); });
  e = error_of([&] { cae::share_nccl_id(1, 2, live, 5, "ae-train --lr 2", {}, kIdBytes); });
  lead.join();
  EXPECT_TRUE(contains(e, live + "/launch") && contains(e, "another launch's rendezvous")) << e;
  EXPECT_TRUE(contains(lead_error, "rank 1 of 2")) << lead_error;
}

TEST(NcclIdExchange, ALinkPlantedAtTheIdIsNotFollowed) {
  TempDir dir, elsewhere;
  // A link where rank 0's id goes, to a file that would pass every check.
  const std::string token = "0123456789abcdef";
  const std::string base = dir.path + "/launch";
  make_launch_folder(base, token, "");
  const std::string target = elsewhere.file("planted");
  write_file(target, id_file(token, some_id(3)));
  const std::string file = base + "/0-nccl-id.rank0";
  ASSERT_EQ(symlink(target.c_str(), file.c_str()), 0);
  std::string e = error_of([&] { cae::share_nccl_id(1, 2, base, 2, "", {}, kIdBytes); });
  EXPECT_TRUE(contains(e, file) && contains(e, "cannot open")) << e;

  // A link at the rendezvous path itself, to a folder elsewhere: no rank makes or reads
  // anything through it.
  const std::string linked = dir.path + "/linked";
  ASSERT_EQ(symlink(elsewhere.path.c_str(), linked.c_str()), 0);
  e = error_of([&] { cae::share_nccl_id(0, 2, linked, 1, "", some_id(4), kIdBytes); });
  EXPECT_TRUE(contains(e, linked) && contains(e, "is already there")) << e;
  e = error_of([&] { cae::share_nccl_id(1, 2, linked, 1, "", {}, kIdBytes); });
  EXPECT_TRUE(contains(e, linked) && contains(e, "is not a folder rank 0 made")) << e;
  struct stat st {};
  EXPECT_NE(stat(elsewhere.file("launch").c_str(), &st), 0) << "a file was made through the link";
  EXPECT_EQ(std::system(("test \"$(ls -A '" + elsewhere.path + "')\" = planted").c_str()), 0);
}

}  // namespace
