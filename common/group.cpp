#include "common/group.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>

#ifdef CIFARAE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/cli.h"
#include "common/device.h"
#include "common/error.h"
#include "common/log.h"
#include "common/rank_launcher.h"
#include "common/rendezvous.h"

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
                               "A path in a folder every rank sees, unique per launch: the group's files go beside it"),
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
    GroupExchange cleanup(0, 1, rendezvous, 1);
    for (const char* tag : {"alive", "done"})
      for (int r = 0; r < opts.launch; ++r) unlink(cleanup.path_of(tag, r).c_str());
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

GroupRank::GroupRank(const GroupOptions& opts, const std::string& output)
    : place(resolve_group_place(opts.rank, opts.world_size, opts.local_rank)),
      exchange(place.rank, place.world, place.grouped() ? group_rendezvous_path(opts.rendezvous, output, place) : "",
               opts.timeout_seconds) {
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

GroupExchange::GroupExchange(int rank, int world, std::string rendezvous, double timeout_seconds)
    : rank_(rank), world_(world), base_(std::move(rendezvous)), timeout_(timeout_seconds) {
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("GroupExchange: bad rank");
  if (world_ > 1) {
    if (base_.empty()) throw std::invalid_argument("GroupExchange: a group needs a rendezvous path");
    heartbeat_ = std::thread([this] { heartbeat_loop(); });
  }
}

GroupExchange::~GroupExchange() {
  stop_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::string GroupExchange::path_of(const std::string& tag, int rank) const {
  return base_ + "." + tag + ".rank" + std::to_string(rank);
}

void GroupExchange::heartbeat_loop() {
  const std::string path = path_of("alive", rank_);
  while (!stop_) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) {
      futimens(fd, nullptr);
      close(fd);
    }
    for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<unsigned char> GroupExchange::await(const std::string& tag, int rank) {
  using clock = std::chrono::steady_clock;
  const std::string path = path_of(tag, rank), alive = path_of("alive", rank);
  const auto started = clock::now();
  for (;;) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
      std::ifstream f(path, std::ios::binary);
      std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (!f.bad()) return bytes;
      throw std::runtime_error(path + ": cannot read rank " + std::to_string(rank) + "'s results");
    }
    // A peer that still touches its heartbeat is working; one that stopped is gone.
    const double waited = std::chrono::duration<double>(clock::now() - started).count();
    double silent = waited;
    if (stat(alive.c_str(), &st) == 0) silent = std::min(waited, std::difftime(std::time(nullptr), st.st_mtime));
    if (silent > timeout_)
      throw std::runtime_error("rank " + std::to_string(rank) + " of " + std::to_string(world_) + " sent no " + tag +
                               " and showed no sign of life for " + std::to_string(int(timeout_)) + " s (" + path +
                               "; did it fail, or is the folder not shared by every rank?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::vector<unsigned char>> GroupExchange::gather(const std::string& tag,
                                                              const std::vector<unsigned char>& mine, bool to_all) {
  if (world_ == 1) return {mine};
  // Numbered in call order (the same on every rank), so a tag may come again.
  const std::string name = std::to_string(tags_.size()) + "-" + tag;
  tags_.push_back(name);
  if (rank_ != 0 || to_all) publish_rendezvous(path_of(name, rank_), mine);
  if (rank_ != 0 && !to_all) return {};
  std::vector<std::vector<unsigned char>> all(static_cast<size_t>(world_));
  for (int r = 0; r < world_; ++r) all[static_cast<size_t>(r)] = r == rank_ ? mine : await(name, r);
  return all;
}

void GroupExchange::finish() {
  if (world_ == 1) return;
  stop_ = true;  // no heartbeat may recreate a file rank 0 removes
  if (heartbeat_.joinable()) heartbeat_.join();
  if (rank_ != 0) {
    publish_rendezvous(path_of("done", rank_), {});
    return;
  }
  for (int r = 1; r < world_; ++r) await("done", r);
  for (const std::string& tag : tags_)
    for (int r = 0; r < world_; ++r) unlink(path_of(tag, r).c_str());
  for (int r = 0; r < world_; ++r) {
    unlink(path_of("done", r).c_str());
    unlink(path_of("alive", r).c_str());
  }
}

}  // namespace cae
