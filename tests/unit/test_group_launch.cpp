// A group's launch in a folder it cannot trust (common/group.h): the launch's own folder,
// refused to a second launch, to a rank of other options and to a second claimant of a
// place; files of another launch refused; links never followed; the agreement of a command
// line. Ranks are threads of this process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/group.h"
#include "tests/support/group_files.h"
#include "tests/support/temp_dir.h"

namespace {

using cae_test::TempDir;

// The message of what `f` throws, "" when it throws nothing.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GroupLaunch, ASecondLaunchOnOnePathIsRefusedAndTheFirstStaysRight) {
  TempDir dir;
  const std::string base = dir.path + "/launch";
  cae::GroupExchange lead(0, 2, base, 20, "svm-fit --C 3");
  struct stat st {};
  ASSERT_EQ(lstat(base.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // Another launch's rank 0, and a rank of other options, in one line naming the folder.
  std::string e = error_of([&] { cae::GroupExchange other(0, 2, base, 20, "svm-fit --C 3"); });
  EXPECT_TRUE(contains(e, base + ": is already there")) << e;
  e = error_of([&] { cae::GroupExchange other(1, 2, base, 20, "svm-fit --C 100"); });
  EXPECT_TRUE(contains(e, "other options or inputs")) << e;
  e = error_of([&] { cae::GroupExchange other(1, 3, base, 20, "svm-fit --C 3"); });
  EXPECT_TRUE(contains(e, "it has 2 ranks")) << e;
  // The launch's own rank 1 joins; a second rank 1 of the same options finds its place taken.
  std::vector<std::vector<unsigned char>> got;
  std::thread rank1([&] {
    cae::GroupExchange g(1, 2, base, 20, "svm-fit --C 3");
    const std::string again = error_of([&] { cae::GroupExchange twin(1, 2, base, 20, "svm-fit --C 3"); });
    EXPECT_TRUE(contains(again, "rank 1's place is taken")) << again;
    g.gather("pairs", {7, 8, 9});
    g.finish();
  });
  got = lead.gather("pairs", {1});
  lead.finish();
  rank1.join();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], (std::vector<unsigned char>{7, 8, 9}));
  EXPECT_NE(lstat(base.c_str(), &st), 0) << "finish() removes the launch's folder";
}

// Sets the times of the folder `path` and of everything in it `seconds` back.
void age_folder(const std::string& path, int seconds) {
  const std::string cmd = "touch -h -d '-" + std::to_string(seconds) + " seconds' '" + path + "'/* '" + path + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
}

TEST(GroupLaunch, ADeadLaunchsFolderIsReplacedALiveOneIsNot) {
  TempDir dir;
  const std::string base = dir.path + "/launch";
  { cae::GroupExchange failed(0, 2, base, 1, "svm-fit --C 3"); }  // ends without finish(): its files stay
  struct stat st {};
  ASSERT_EQ(stat((base + "/claim.rank0").c_str(), &st), 0);
  std::string e = error_of([&] { cae::GroupExchange soon(0, 2, base, 1, "svm-fit --C 3"); });
  EXPECT_TRUE(contains(e, "is already there")) << "a few seconds of silence are no death: " << e;
  age_folder(base, 60);
  // The next launch's rank 1 waits for a folder that is alive, rank 0 replaces the dead one.
  std::vector<std::vector<unsigned char>> got;
  std::thread rank1([&] {
    cae::GroupExchange g(1, 2, base, 20, "svm-fit --C 3");
    g.gather("pairs", {4, 2});
    g.finish();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    cae::GroupExchange lead(0, 2, base, 20, "svm-fit --C 3");
    got = lead.gather("pairs", {1});
    lead.finish();
  }
  rank1.join();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], (std::vector<unsigned char>{4, 2}));
}

TEST(GroupLaunch, AFileOfAnotherLaunchIsRefused) {
  TempDir dir;
  const std::string base = dir.path + "/launch";
  cae::GroupExchange lead(0, 2, base, 20);
  // rank 1's results as another launch would write them: the right name, another token.
  cae::ByteWriter payload;
  payload.put<double>(2.5);
  cae_test::write_file(cae::GroupExchange::file_of(base, "0-pairs", 1),
                       cae_test::rank_file("foreign", 1, payload.bytes()));
  const std::string e = error_of([&] { lead.gather("pairs", {1}); });
  EXPECT_TRUE(contains(e, "0-pairs.rank1: written by another launch")) << e;
}

TEST(GroupLaunch, LinksAreNeverFollowed) {
  TempDir dir;
  const std::string outside = dir.path + "/outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0700), 0);
  // The rendezvous path a link to a folder elsewhere: neither rank 0 nor a joining rank takes it.
  const std::string linked = dir.path + "/linked";
  ASSERT_EQ(symlink(outside.c_str(), linked.c_str()), 0);
  std::string e = error_of([&] { cae::GroupExchange g(0, 2, linked, 1); });
  EXPECT_TRUE(contains(e, "is already there")) << e;
  e = error_of([&] { cae::GroupExchange g(1, 2, linked, 1); });
  EXPECT_TRUE(contains(e, "is not a folder rank 0 made")) << e;
  // A folder open to others is not one rank 0 made.
  const std::string open_folder = dir.path + "/open";
  ASSERT_EQ(mkdir(open_folder.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_folder.c_str(), 0755), 0);
  e = error_of([&] { cae::GroupExchange g(1, 2, open_folder, 1); });
  EXPECT_TRUE(contains(e, "is not this user's private folder")) << e;
  // A parent anyone may write to without the sticky bit.
  const std::string shared = dir.path + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  e = error_of([&] { cae::GroupExchange g(0, 2, shared + "/launch", 1); });
  EXPECT_TRUE(contains(e, "writable by anyone and has no sticky bit")) << e;
  // The NCCL id's links: tests/unit/test_nccl_id_exchange.cpp.
}

TEST(GroupLaunch, TheAgreementLeavesOutPerRankOptionsAndSeesInputsChange) {
  TempDir dir;
  const std::string features = dir.file("f.h5");
  std::ofstream(features) << "first";
  const auto agreement = [&](std::vector<std::string> extra) {
    std::vector<std::string> line{"/usr/bin/svm-fit", "--features", features, "--C", "3"};
    line.insert(line.end(), extra.begin(), extra.end());
    return cae::launch_agreement(line);
  };
  const std::string rank0 = agreement({"--rank", "0", "--local-rank", "0", "--threads", "4", "--json"});
  EXPECT_EQ(rank0, agreement({"--rank=1", "--local-rank", "1", "--threads=2", "-q", "--group-timeout", "9"}));
  EXPECT_TRUE(contains(rank0, "svm-fit --features " + features + " [5 bytes, modified ")) << rank0;
  EXPECT_NE(rank0, agreement({"--C", "100"}));
  std::ofstream(features) << "other features";
  EXPECT_NE(rank0, agreement({})) << "a rewritten input is another input";
}

}  // namespace
