#include "common/group.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>

#ifdef CIFARAE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/cli.h"
#include "common/device.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rank_launcher.h"
#include "common/stop_signal.h"

namespace cae {

const char* process_env(const char* name) { return std::getenv(name); }

void add_group_options(CLI::App& app, GroupOptions& opts, const std::string& what, bool gpus, bool cpu_ranks) {
  CLI::Option* ranks = nullptr;
  if (cpu_ranks)
    ranks = default_means(app.add_option("--ranks", opts.launch,
                                         "Start N ranks (processes) of this tool on this machine, each of which " +
                                             what + "; rank 0 writes the output. Each rank gets the cores / N "
                                             "unless --threads says otherwise")
                              ->check(CLI::Range(1, 64)),
                          "one process, not a group");
  if (gpus) {
    CLI::Option* g = default_means(
        app.add_option("--gpus", opts.launch,
                       std::string(cpu_ranks ? "As --ranks N, one GPU each"
                                             : "Start N ranks of this tool on this machine, one GPU each, each of which " +
                                                   what) +
                           " (needs --device gpu, or auto on a machine with GPUs)")
            ->check(CLI::Range(1, 64))
            ->each([&opts](const std::string&) { opts.launch_gpus = true; }),
        "one GPU, not a group");
    if (ranks) g->excludes(ranks);
  }
  default_means(app.add_option("--rank", opts.rank, "This process's rank in a group, given by a launcher")
                    ->check(CLI::NonNegativeNumber),
                "SLURM_PROCID in an srun step of several tasks, else torchrun's RANK, else not in a group");
  default_means(app.add_option("--world-size", opts.world_size, "Ranks in the group")->check(CLI::PositiveNumber),
                "SLURM_STEP_NUM_TASKS (the tasks of an srun step), else torchrun's WORLD_SIZE, else not in a group");
  default_means(app.add_option("--local-rank", opts.local_rank, "This rank's GPU on its node")
                    ->check(CLI::NonNegativeNumber),
                "SLURM_LOCALID, else LOCAL_RANK, else --rank");
  default_means(app.add_option("--rendezvous", opts.rendezvous,
                               "A path in a folder every rank sees, unique per launch: rank 0 creates it as the group's own "
                               "folder, and a second launch on it is refused"),
                "beside -o, named after the launch or the Slurm job step");
  app.add_option("--group-timeout", opts.timeout_seconds,
                 "Seconds a rank waits for a peer that shows no sign of life before it stops with an error naming it")
      ->check(CLI::Range(1.0, 86400.0));
}

namespace {

// A non-negative integer from the environment; -1 when unset; throws when malformed.
int env_int(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > (1L << 20))
    throw UsageError(std::string(name) + "='" + v + "' is not a rank number");
  return int(x);
}

}  // namespace

GroupPlace resolve_group_place(int rank_opt, int world_opt, int local_rank_opt, const EnvLookup& env) {
  GroupPlace r;
  if (rank_opt >= 0 || world_opt >= 0) {
    if (rank_opt < 0 || world_opt < 0) throw UsageError("--rank and --world-size go together");
    if (world_opt < 1) throw UsageError("--world-size must be at least 1");
    if (rank_opt >= world_opt)
      throw UsageError("--rank " + std::to_string(rank_opt) + " is outside --world-size " + std::to_string(world_opt) +
                       " (ranks are 0.." + std::to_string(world_opt - 1) + ")");
    r.rank = rank_opt;
    r.world = world_opt;
    r.local_rank = local_rank_opt >= 0 ? local_rank_opt : rank_opt;
    r.source = "options";
    return r;
  }
  if (local_rank_opt >= 0) throw UsageError("--local-rank needs --rank and --world-size");
  struct Scheme {
    const char *world, *rank, *local, *source;
  };
  for (const Scheme& s : {Scheme{"SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID", "slurm"},
                          Scheme{"WORLD_SIZE", "RANK", "LOCAL_RANK", "torchrun"}}) {
    const int ntasks = env_int(env, s.world);
    if (ntasks <= 1) continue;
    const int procid = env_int(env, s.rank), localid = env_int(env, s.local);
    if (procid < 0 || procid >= ntasks)
      throw UsageError(std::string(s.world) + "=" + std::to_string(ntasks) + " but " + s.rank + " is " +
                       (procid < 0 ? std::string("unset") : std::to_string(procid)));
    r.rank = procid;
    r.world = ntasks;
    r.local_rank = localid >= 0 ? localid : 0;
    r.source = s.source;
    return r;
  }
  return r;
}

std::string group_rendezvous_path(const std::string& given, const std::string& output, const GroupPlace& place,
                                  const std::string& launch_id, const EnvLookup& env) {
  if (!given.empty()) return given;
  std::string id = launch_id;
  if (id.empty() && place.source == "slurm") {
    const char* job = env("SLURM_JOB_ID");
    const char* step = env("SLURM_STEP_ID");
    if (job && *job) id = std::string("slurm-") + job + "." + (step && *step ? step : "0");
  }
  if (id.empty() && place.source == "torchrun") {
    const char* run = env("TORCHELASTIC_RUN_ID");  // "none" unless torchrun was given --rdzv-id
    if (run && *run && std::string(run) != "none") id = std::string("torchrun-") + run;
  }
  if (id.empty())
    throw UsageError("a group of " + std::to_string(place.world) +
                     " ranks needs --rendezvous PATH (a path every rank sees, unique per launch), or let the tool start its ranks "
                     "(--ranks/--gpus N)");
  for (char& c : id)  // the id becomes part of a file name
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '_';
  const size_t slash = output.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : output.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? output : output.substr(slash + 1);
  return dir + "." + base + ".group-" + id;
}

int launch_group(const GroupOptions& opts, const std::string& output, bool share_cores) {
  if (opts.rank >= 0 || opts.world_size >= 0 || !opts.rendezvous.empty())
    throw UsageError(std::string(opts.launch_gpus ? "--gpus" : "--ranks") +
                     " starts the ranks itself: leave out --rank, --world-size and --rendezvous");
  GroupPlace place;
  place.world = opts.launch;
  // The pid and a random tag: a folder may hold the files of an earlier, failed launch.
  char launch_tag[16];
  std::snprintf(launch_tag, sizeof(launch_tag), "%08x", static_cast<unsigned>(std::random_device{}()));
  const std::string rendezvous = group_rendezvous_path("", output, place, std::to_string(getpid()) + "-" + launch_tag);
  std::vector<std::string> args;
  {
    std::vector<std::string> line = tool_command_line();
    std::vector<char*> argv;
    for (std::string& s : line) argv.push_back(s.data());
    std::vector<std::string> a = args_without_option(int(argv.size()), argv.data(), "--ranks");
    std::vector<char*> p{argv[0]};
    for (std::string& s : a) p.push_back(s.data());
    args = args_without_option(int(p.size()), p.data(), "--gpus");
  }
  bool threads_given = false;
  for (const std::string& a : args) threads_given = threads_given || a == "--threads" || a.rfind("--threads=", 0) == 0;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  int failed = -1;
  const int status = launch_ranks(
      opts.launch, args,
      [&](int r) {
        std::vector<std::string> a{"--rank",       std::to_string(r), "--world-size", std::to_string(opts.launch),
                                   "--local-rank", std::to_string(r), "--rendezvous", rendezvous};
        if (share_cores && !threads_given) {
          a.push_back("--threads");
          a.push_back(std::to_string(std::max(1, cores / opts.launch)));
        }
        return a;
      },
      &failed);
  // A failed launch leaves its exchange files for a post-mortem, not its heartbeats.
  unlink(rendezvous.c_str());
  // Every rank stopped on the launcher's SIGUSR1/SIGTERM with its checkpoint written: the
  // group is interrupted, not failed (each rank said so).
  if (status == kExitInterrupted) throw Interrupted("");
  if (status != 0) {
    for (const char* tag : {"alive", "done"})
      for (int r = 0; r < opts.launch; ++r) unlink(GroupExchange::file_of(rendezvous, tag, r).c_str());
    throw std::runtime_error("rank " + std::to_string(failed) + " of " + std::to_string(opts.launch) +
                             " failed (exit status " + std::to_string(status) + "); the other ranks were stopped");
  }
  return 0;
}

int launch_group_checked(const GroupOptions& opts, bool on_gpu, const std::string& output, bool share_cores) {
  if (opts.launch_gpus && !on_gpu)
    throw UsageError("--gpus needs --device gpu (or auto on a machine with GPUs); --ranks N starts CPU ranks");
  if (on_gpu && opts.launch > gpu_count())
    throw UsageError("--gpus " + std::to_string(opts.launch) + ": this machine has " + std::to_string(gpu_count()) +
                     " GPU(s)");
  return launch_group(opts, output, share_cores);
}

GroupRank::GroupRank(const GroupOptions& opts, const std::string& output, bool stop_signals)
    : place(resolve_group_place(opts.rank, opts.world_size, opts.local_rank)),
      exchange(place.rank, place.world, place.grouped() ? group_rendezvous_path(opts.rendezvous, output, place) : "",
               opts.timeout_seconds, place.grouped() ? launch_agreement(tool_command_line()) : "") {
  if (!stop_signals) take_stop_signals_as_usual();
  if (!exchange.lead()) set_quiet(true);
}

int select_group_gpu(int local_rank) {
#ifdef CIFARAE_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) throw std::runtime_error("--device gpu: no CUDA GPU found");
  const cudaError_t err = cudaSetDevice(local_rank % count);
  if (err != cudaSuccess)
    throw std::runtime_error("cannot use GPU " + std::to_string(local_rank % count) + ": " + cudaGetErrorString(err));
  return local_rank % count;
#else
  (void)local_rank;
  throw std::runtime_error("--device gpu: this build has no CUDA support (rebuild on a machine with nvcc)");
#endif
}

namespace {

constexpr uint32_t kGroupFileMagic = 0x43414547;  // "CAEG": a file of one launch's exchange
constexpr const char* kLaunchFile = "launch";

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

// The one polling loop of a group: until `ready()` says yes, every 20 ms; `silent(waited)`
// says how long the awaited peer has shown no sign of life, and past `timeout` `gone()`
// is thrown.
void poll_until(const std::function<bool()>& ready, const std::function<double(double)>& silent, double timeout,
                const std::function<std::string()>& gone) {
  const auto started = Clock::now();
  while (!ready()) {
    if (silent(std::chrono::duration<double>(Clock::now() - started).count()) > timeout)
      throw std::runtime_error(gone());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

double waited_only(double waited) { return waited; }

// The folder holding `path` and its last part.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// A folder anyone may write to without the sticky bit lets anyone rename or replace what a
// group puts in it: refused.
void refuse_open_folder(const std::string& folder) {
  struct stat st {};
  if (stat(folder.c_str(), &st) != 0) fail_file(folder, "cannot reach the rendezvous folder: " + errno_text());
  if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
    fail_file(folder, "is writable by anyone and has no sticky bit: a group's rendezvous needs a folder others "
                      "cannot replace files in (give --rendezvous a path in a folder of your own)");
}

// Reads or writes `n` bytes at `p` through `fd`, across short transfers and interruptions;
// returns how many moved (fewer: the end of the file, or an error in errno).
size_t transfer(int fd, unsigned char* p, size_t n, bool reading) {
  size_t done = 0;
  while (done < n) {
    const ssize_t k = reading ? read(fd, p + done, n - done) : write(fd, p + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    done += static_cast<size_t>(k);
  }
  return done;
}

// The file `name` in the folder `dir` (no link followed), or nothing when it is not there yet.
std::optional<std::vector<unsigned char>> read_at(int dir, const std::string& name, const std::string& shown) {
  const int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail_file(shown, "cannot open: " + errno_text());
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    fail_file(shown, "is not a regular file");
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(st.st_size));
  const size_t got = transfer(fd, bytes.data(), bytes.size(), /*reading=*/true);
  close(fd);
  if (got != bytes.size()) fail_file(shown, "cannot read it whole");
  return bytes;
}

// Writes `bytes` as `name` in the folder `dir`: a new file under a temporary name, created
// without following a link and never over an existing one, then renamed into place.
void publish_at(int dir, const std::string& name, const std::vector<unsigned char>& bytes, const std::string& shown) {
  const std::string temp = name + ".tmp-" + std::to_string(getpid()) + "-" +
                           std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  const int fd = openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail_file(shown, "cannot create: " + errno_text());
  const size_t put = transfer(fd, const_cast<unsigned char*>(bytes.data()), bytes.size(), /*reading=*/false);
  const bool written = put == bytes.size() && close(fd) == 0;
  if (!written || renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
    const std::string why = errno_text();
    unlinkat(dir, temp.c_str(), 0);
    fail_file(shown, "cannot write: " + why);
  }
}

// The launch folder `path`, opened without following a link; -1 while it is not there.
// Throws for a folder that is not this user's alone: not one a rank 0 of this tool made.
int open_private_folder(const std::string& path) {
  const int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    if (errno == ENOENT) return -1;
    fail_file(path, "is not a folder rank 0 made (" + errno_text() + ")");
  }
  struct stat st {};
  if (fstat(dir, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    close(dir);
    fail_file(path, "is not this user's private folder (owner " + std::to_string(st.st_uid) + ", mode " +
                        strprintf("%04o", unsigned(st.st_mode & 07777)) + "): not a launch of this tool");
  }
  return dir;
}

// Calls `each(name)` for every entry of the folder `dir` but "." and "..".
void for_each_entry(int dir, const std::function<void(const char*)>& each) {
  const int listing_fd = dup(dir);
  DIR* listing = listing_fd >= 0 ? fdopendir(listing_fd) : nullptr;
  if (!listing) {
    if (listing_fd >= 0) close(listing_fd);
    return;
  }
  rewinddir(listing);  // the copy shares the offset of `dir`
  while (const dirent* e = readdir(listing))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) each(e->d_name);
  closedir(listing);
}

// Seconds since anything in the launch folder `dir` changed: the folder and its files.
double idle_seconds(int dir) {
  struct stat st {};
  if (fstat(dir, &st) != 0) return 0;
  std::time_t newest = st.st_mtime;
  for_each_entry(dir, [&](const char* name) {
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0) newest = std::max(newest, st.st_mtime);
  });
  return std::difftime(std::time(nullptr), newest);
}

// Removes the files of the launch folder `dir`, then the folder `path`.
void remove_folder(int dir, const std::string& path) {
  for_each_entry(dir, [&](const char* name) { unlinkat(dir, name, 0); });
  rmdir(path.c_str());
}

std::string launch_token() {
  std::random_device rd;
  char token[24];
  std::snprintf(token, sizeof(token), "%08x%08x", static_cast<unsigned>(rd()), static_cast<unsigned>(rd()));
  return token;
}

}  // namespace

std::string launch_agreement(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  std::vector<std::string> args = argv;
  for (const char* per_rank : {"--rank", "--local-rank", "--threads", "--group-timeout"}) {
    std::vector<char*> p;
    for (std::string& a : args) p.push_back(a.data());
    std::vector<std::string> rest = args_without_option(int(p.size()), p.data(), per_rank);
    rest.insert(rest.begin(), args.front());
    args = std::move(rest);
  }
  std::string out = split_path(args.front()).second;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-q" || a == "--quiet" || a == "--json") continue;
    out += " " + a;
    const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    const std::string file = eq == std::string::npos ? a : a.substr(eq + 1);
    struct stat st {};
    if (!file.empty() && stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      out += " [" + std::to_string(static_cast<long long>(st.st_size)) + " bytes, modified " +
             std::to_string(static_cast<long long>(st.st_mtim.tv_sec)) + "." +
             std::to_string(static_cast<long long>(st.st_mtim.tv_nsec)) + "]";
  }
  return out;
}

std::vector<unsigned char> share_nccl_id(int rank, int world, const std::string& rendezvous, double timeout_seconds,
                                         const std::string& agreement, const std::vector<unsigned char>& id,
                                         size_t size) {
  if (world == 1) return id;
  GroupExchange group(rank, world, rendezvous, timeout_seconds, agreement);
  std::vector<unsigned char> got = group.broadcast("nccl-id", id);
  if (got.size() != size)
    fail_file(GroupExchange::file_of(rendezvous, "0-nccl-id", 0),
              "an NCCL id of " + std::to_string(got.size()) + " bytes, expected " + std::to_string(size));
  group.finish();
  return got;
}

GroupExchange::GroupExchange(int rank, int world, std::string rendezvous, double timeout_seconds, std::string agreement)
    : rank_(rank), world_(world), base_(std::move(rendezvous)), timeout_(timeout_seconds), agreement_(std::move(agreement)) {
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("GroupExchange: bad rank");
  if (world_ == 1) return;
  if (base_.empty()) throw std::invalid_argument("GroupExchange: a group needs a rendezvous path");
  while (base_.size() > 1 && base_.back() == '/') base_.pop_back();
  refuse_open_folder(split_path(base_).first);
  try {
    if (rank_ == 0)
      create_folder();
    else
      join_folder();
    claim_place();
  } catch (...) {
    if (dir_ >= 0) close(dir_);
    throw;
  }
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

GroupExchange::~GroupExchange() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
  if (dir_ >= 0) close(dir_);
}

void GroupExchange::create_folder() {
  // mkdir neither follows a link planted at the path nor takes a folder that is there: the
  // folder is this launch's alone. One that nothing touched for longer than the group
  // timeout (dead_after) is a dead launch's (a live rank touches its heartbeat every
  // second): replaced, so a job requeued under the same name starts.
  const auto refuse = [this] {
    fail_file(base_, "is already there: another launch's rendezvous (running, or left by a failed one less than " +
                         std::to_string(int(dead_after())) + " s ago). Give each launch its own --rendezvous, or remove "
                         "it if no launch uses it");
  };
  if (mkdir(base_.c_str(), 0700) != 0) {
    if (errno != EEXIST) fail_file(base_, "cannot create the group's folder: " + errno_text());
    int old = -1;
    try {
      old = open_private_folder(base_);
    } catch (const std::runtime_error&) {
      refuse();
    }
    if (old < 0) refuse();
    const double idle = idle_seconds(old);
    if (idle <= dead_after()) {
      close(old);
      refuse();
    }
    log_warn("%s: a launch's folder untouched for %.0f s (its ranks are gone): replaced", base_.c_str(), idle);
    remove_folder(old, base_);
    close(old);
    if (mkdir(base_.c_str(), 0700) != 0) refuse();
  }
  dir_ = open(base_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_ < 0) fail_file(base_, "cannot open the group's folder: " + errno_text());
  token_ = launch_token();
  ByteWriter w;
  w.put<uint32_t>(kGroupFileMagic);
  w.put<int32_t>(world_);
  w.put_vector(std::vector<char>(token_.begin(), token_.end()));
  w.put_vector(std::vector<char>(agreement_.begin(), agreement_.end()));
  publish_at(dir_, kLaunchFile, w.bytes(), base_ + "/" + kLaunchFile);
}

void GroupExchange::join_folder() {
  const std::string shown = base_ + "/" + kLaunchFile;
  std::optional<std::vector<unsigned char>> launch;
  poll_until(
      [&] {
        if (dir_ < 0 && (dir_ = open_private_folder(base_)) < 0) return false;
        // A dead launch's folder, left to rank 0 to replace; or one replaced since it was opened.
        if (idle_seconds(dir_) <= dead_after()) launch = read_at(dir_, kLaunchFile, shown);
        if (launch) return true;
        close(dir_);
        dir_ = -1;
        return false;
      },
      waited_only, timeout_,
      [&] {
        return "rank 0 of " + std::to_string(world_) + " made no group folder " + base_ + " within " +
               std::to_string(int(timeout_)) + " s (did it fail, or is the folder not shared by every rank?)";
      });
  ByteReader r(*launch, shown);
  if (r.get<uint32_t>() != kGroupFileMagic) r.fail("not a group's launch file");
  const int32_t world = r.get<int32_t>();
  const std::vector<char> token = r.get_vector<char>(), agreement = r.get_vector<char>();
  token_.assign(token.begin(), token.end());
  if (world != world_)
    r.fail("another launch's rendezvous: it has " + std::to_string(world) + " ranks, this rank's has " +
           std::to_string(world_) + " (give each launch its own --rendezvous)");
  if (std::string(agreement.begin(), agreement.end()) != agreement_)
    r.fail("another launch's rendezvous: its ranks run other options or inputs than this rank " +
           std::to_string(rank_) + " (give each launch its own --rendezvous)");
}

void GroupExchange::claim_place() {
  const std::string name = "claim.rank" + std::to_string(rank_);
  const int fd = openat(dir_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST)
      fail_file(base_, "rank " + std::to_string(rank_) + "'s place is taken: two launches share this --rendezvous "
                       "(give each its own), or it is a failed launch's folder (remove it)");
    fail_file(base_ + "/" + name, "cannot create: " + errno_text());
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  const ssize_t n = write(fd, pid.data(), pid.size());
  close(fd);
  if (n != ssize_t(pid.size())) fail_file(base_ + "/" + name, "cannot write");
}

double GroupExchange::dead_after() const {
  // Heartbeats come every second and file times count whole seconds: a few seconds of
  // silence are no death, whatever the timeout.
  return std::max(timeout_, 5.0);
}

std::string GroupExchange::file_of(const std::string& rendezvous, const std::string& tag, int rank) {
  return rendezvous + "/" + tag + ".rank" + std::to_string(rank);
}

void GroupExchange::heartbeat_loop() {
  const std::string name = "alive.rank" + std::to_string(rank_);
  while (!stop_) {
    const int fd = openat(dir_, name.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      futimens(fd, nullptr);
      close(fd);
    }
    for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void GroupExchange::publish(const std::string& name, const std::vector<unsigned char>& payload) {
  ByteWriter w;
  w.put<uint32_t>(kGroupFileMagic);
  w.put_vector(std::vector<char>(token_.begin(), token_.end()));
  w.put<int32_t>(rank_);
  std::vector<unsigned char> bytes = w.bytes();
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  const std::string file = name + ".rank" + std::to_string(rank_);
  publish_at(dir_, file, bytes, base_ + "/" + file);
}

std::vector<unsigned char> GroupExchange::await(const std::string& tag, int rank) {
  const std::string name = tag + ".rank" + std::to_string(rank), shown = base_ + "/" + name;
  const std::string alive = "alive.rank" + std::to_string(rank);
  std::optional<std::vector<unsigned char>> got;
  poll_until([&] { return (got = read_at(dir_, name, shown)).has_value(); },
             [&](double waited) {
               // A peer that still touches its heartbeat is working; one that stopped is gone.
               struct stat st {};
               if (fstatat(dir_, alive.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return waited;
               return std::min(waited, std::difftime(std::time(nullptr), st.st_mtime));
             },
             timeout_,
             [&] {
               return "rank " + std::to_string(rank) + " of " + std::to_string(world_) + " sent no " + tag +
                      " and showed no sign of life for " + std::to_string(int(timeout_)) + " s (" + shown +
                      "; did it fail, or is the folder not shared by every rank?)";
             });
  ByteReader r(*got, shown);
  if (r.get<uint32_t>() != kGroupFileMagic) r.fail("not a group exchange file");
  const std::vector<char> token = r.get_vector<char>();
  if (std::string(token.begin(), token.end()) != token_) r.fail("written by another launch (its token differs)");
  if (r.get<int32_t>() != rank) r.fail("written by another rank");
  return std::vector<unsigned char>(got->begin() + static_cast<std::ptrdiff_t>(r.position()), got->end());
}

std::vector<std::vector<unsigned char>> GroupExchange::gather(const std::string& tag,
                                                              const std::vector<unsigned char>& mine, bool to_all) {
  if (world_ == 1) return {mine};
  // Numbered in call order (the same on every rank), so a tag may come again.
  const std::string name = std::to_string(tags_.size()) + "-" + tag;
  tags_.push_back(name);
  if (rank_ != 0 || to_all) publish(name, mine);
  if (rank_ != 0 && !to_all) return {};
  std::vector<std::vector<unsigned char>> all(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) all[static_cast<size_t>(r)] = r == rank_ ? mine : await(name, r);
  return all;
}

std::vector<unsigned char> GroupExchange::broadcast(const std::string& tag, const std::vector<unsigned char>& mine) {
  if (world_ == 1) return mine;
  const std::string name = std::to_string(tags_.size()) + "-" + tag;
  tags_.push_back(name);
  if (rank_ == 0) {
    publish(name, mine);
    return mine;
  }
  return await(name, 0);
}

void GroupExchange::finish() {
  if (world_ == 1) return;
  stop_ = true;  // no heartbeat may recreate a file rank 0 removes
  if (heartbeat_.joinable()) heartbeat_.join();
  if (rank_ != 0) {
    publish("done", {});
    return;
  }
  for (int r = 1; r < world_; ++r) await("done", r);
  // Every rank has read what it needs: the folder and all in it go.
  remove_folder(dir_, base_);
}

}  // namespace cae
