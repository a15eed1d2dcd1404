// A group of ranks: the processes of one run that share its work (docs/MULTI_GPU.md).
//
// Every tool that can run on a group registers the same options (add_group_options) and
// resolves them the same way (resolve_group):
//   --ranks N / --gpus N   this process starts N ranks of itself on this node and waits
//                          for them (common/rank_launcher.h); --gpus also means one GPU each;
//   --rank/--world-size/--local-rank   this process's place, given by a launcher, else
//                          Slurm's SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID (inside an
//                          srun step of more than one task), else torchrun's RANK/WORLD_SIZE/
//                          LOCAL_RANK, else one process, not in a group;
//   --rendezvous PATH      a path in a folder every rank sees, unique per launch: rank 0
//                          makes it the launch's folder, through which results travel
//                          (GroupExchange), the NCCL id of ae-train among them;
//   --group-timeout S      how long a rank waits for a silent peer before it gives up.
//
// GroupExchange moves results between ranks through that shared folder, so a group needs
// neither NCCL nor MPI (CPU ranks on a cluster of plain nodes). The folder is not trusted:
// rank 0 creates the launch's own folder PATH (mode 0700, exclusively: a second launch on
// the same path is refused, and so are the leftovers of a failed one until nothing in them
// changed for the group timeout, when they are replaced) and writes PATH/launch, the
// launch's random token, its size and what its ranks must agree on (the command line less
// the per-rank options, and the size and time of every file it names). A joining rank
// refuses a folder that is a link, not the user's, or open to others, and a launch file of
// other options; it claims its place (PATH/claim.rank<r>, exclusively) and every file it
// writes carries the token, created without following links and renamed into place. A rank
// touches PATH/alive.rank<r> every second while it lives, so a reader waits as long as the
// peer works and fails within the group timeout of its death, naming it.
#pragma once
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace CLI {
class App;
}

namespace cae {

struct GroupOptions {
  int launch = 0;  // --ranks N or --gpus N: start N ranks here; 0: this process is one rank
  bool launch_gpus = false;  // the count came from --gpus
  int rank = -1, world_size = -1, local_rank = -1;  // -1: not given
  std::string rendezvous;
  double timeout_seconds = 300;
};

// Registers --ranks (when `cpu_ranks`: a tool whose ranks can be CPU processes), --gpus
// (when `gpus`), --rank, --world-size, --local-rank, --rendezvous and --group-timeout.
// `what` says what a rank does, for --help ("fits its share of the class pairs").
void add_group_options(CLI::App& app, GroupOptions& opts, const std::string& what, bool gpus = true,
                       bool cpu_ranks = true);

// The environment, as a function (tests pass their own). Returns nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;
const char* process_env(const char* name);

struct GroupPlace {
  int rank = 0, world = 1, local_rank = 0;
  std::string source = "none";  // "options", "slurm", "torchrun", "none"
  bool grouped() const { return world > 1; }
};

// Where this process sits: the options when given (>= 0), else Slurm's variables inside an
// srun step of more than one task (not SLURM_NTASKS: a batch script sees that too, and it is
// not a rank), else torchrun's RANK/WORLD_SIZE (WORLD_SIZE > 1), else one rank. Throws
// cae::UsageError for inconsistent values (rank outside [0, world), half given).
GroupPlace resolve_group_place(int rank_opt, int world_opt, int local_rank_opt, const EnvLookup& env = process_env);

// The rendezvous path of a launch: `given` when set; else beside `output` (a folder every
// rank sees), named after the launch: `launch_id` (the launcher's pid), the Slurm job step,
// or torchrun's run id. UsageError when none names the launch.
std::string group_rendezvous_path(const std::string& given, const std::string& output, const GroupPlace& place,
                                  const std::string& launch_id = "", const EnvLookup& env = process_env);

// --ranks/--gpus N: starts N ranks of this executable (its tool_command_line() less those options, plus
// each rank's --rank/--world-size/--local-rank/--rendezvous) and waits for them. Returns
// 0, or throws std::runtime_error naming the first rank that failed (the others are
// stopped). With `share_cores` (a tool with --threads) and no --threads given, each rank
// gets --threads cores/N, so N ranks do not fight over the cores.
int launch_group(const GroupOptions& opts, const std::string& output, bool share_cores = false);

// launch_group for a tool whose ranks compute on the CPU or on their own GPU (svm-fit,
// svm-eval, ae-encode): --gpus needs `on_gpu` and at most this machine's GPUs (UsageError
// otherwise); --ranks starts CPU ranks.
int launch_group_checked(const GroupOptions& opts, bool on_gpu, const std::string& output, bool share_cores);

// Makes GPU `local_rank` modulo the GPUs this process sees the current one, for a rank
// that computes on its own GPU without NCCL (svm-fit, svm-eval, ae-encode on a group; under
// srun with one GPU per task the task sees one), and returns its index. Throws without CUDA
// or a GPU.
int select_group_gpu(int local_rank);

// Bytes in, bytes out: the results a rank hands to the others. Sizes are checked against
// the bytes actually there before anything is allocated.
class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    append(&v, sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    put<uint64_t>(v.size());
    append(v.data(), v.size() * sizeof(T));
  }
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, p, n);
  }
  std::vector<unsigned char> bytes_;
};

class ByteReader {
 public:
  ByteReader(const std::vector<unsigned char>& bytes, std::string name) : b_(bytes), name_(std::move(name)) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t count = get<uint64_t>();
    if (count > (b_.size() - at_) / sizeof(T)) fail("a list of " + std::to_string(count) + " values runs past the end");
    std::vector<T> v(static_cast<size_t>(count));
    if (count) std::memcpy(v.data(), b_.data() + at_, static_cast<size_t>(count) * sizeof(T));
    at_ += static_cast<size_t>(count) * sizeof(T);
    return v;
  }
  bool done() const { return at_ == b_.size(); }
  size_t position() const { return at_; }
  [[noreturn]] void fail(const std::string& what) const { throw std::runtime_error(name_ + ": " + what); }

 private:
  void need(size_t n) const {
    if (n > b_.size() - at_) fail("truncated (" + std::to_string(b_.size()) + " bytes)");
  }
  const std::vector<unsigned char>& b_;
  std::string name_;
  size_t at_ = 0;
};

// The exchange of one rank. With world == 1 every call returns at once (no files).
class GroupExchange {
 public:
  // Rank 0 creates the folder `rendezvous`; the others wait for it (up to the timeout) and
  // join it, refusing a launch whose `agreement` differs. Throws std::runtime_error with one
  // line naming the folder and the problem.
  GroupExchange(int rank, int world, std::string rendezvous, double timeout_seconds, std::string agreement = "");
  ~GroupExchange();
  GroupExchange(const GroupExchange&) = delete;
  GroupExchange& operator=(const GroupExchange&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  bool lead() const { return rank_ == 0; }

  // Every rank calls it, in the same order, with the same tag. Returns every rank's
  // bytes in rank order on rank 0, and on every rank when `to_all`; else an empty list.
  // Throws std::runtime_error naming the rank that went silent.
  std::vector<std::vector<unsigned char>> gather(const std::string& tag, const std::vector<unsigned char>& mine,
                                                 bool to_all = false);

  // Every rank calls it, in the same order, with the same tag: rank 0's `mine` on every
  // rank (the others' `mine` is ignored).
  std::vector<unsigned char> broadcast(const std::string& tag, const std::vector<unsigned char>& mine);

  // The last call of every rank: the others say they are done reading, then rank 0 removes
  // the launch's folder. Without it (a failure) the files stay for a post-mortem.
  void finish();

  // The file named `tag` of rank `rank` in the launch folder `rendezvous` (gather numbers
  // its tags: "0-pairs", "1-cv", ...; "alive" and "done" are the heartbeat and the farewell).
  static std::string file_of(const std::string& rendezvous, const std::string& tag, int rank);

 private:
  void create_folder();
  void join_folder();
  void claim_place();
  double dead_after() const;  // seconds untouched after which a launch folder is a dead launch's
  void publish(const std::string& name, const std::vector<unsigned char>& payload);
  std::vector<unsigned char> await(const std::string& tag, int rank);
  void heartbeat_loop();
  int rank_, world_;
  std::string base_;
  double timeout_;
  std::string agreement_, token_;
  int dir_ = -1;  // the launch folder, opened once: every file is made and read relative to it
  std::vector<std::string> tags_;
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

// What the ranks of one launch must agree on, from a command line (argv): the tool's name,
// its arguments less those that differ per rank (--rank, --local-rank, --threads,
// --group-timeout, -q, --json), and the size and modification time of each argument that
// names a file (features rewritten between two launches are other features).
std::string launch_agreement(const std::vector<std::string>& argv);

// The NCCL id of ae-train's data-parallel group: rank 0's `id` handed to every rank through
// a GroupExchange on the launch folder `rendezvous` (its token and its `agreement`), so a
// rank takes only the id of its own launch, from a file made without following links, and
// never a file left at the path by another launch. Returns rank 0's id on every rank;
// throws std::runtime_error naming the file when it is another launch's, a link, or not
// `size` bytes. Every rank has the id when it returns, so the folder is gone.
std::vector<unsigned char> share_nccl_id(int rank, int world, const std::string& rendezvous, double timeout_seconds,
                                         const std::string& agreement, const std::vector<unsigned char>& id,
                                         size_t size);

// This process as one rank of its group (or the only one): its place, from the options or
// the launcher's variables, and its exchange, with the rendezvous beside `output` unless
// --rendezvous names one, and `launch_agreement` of this command line. Every rank but rank 0
// is quiet: rank 0 alone logs and writes. A rank that will not catch SIGUSR1/SIGTERM itself
// (`stop_signals` false: no StopSignals follows) takes them as usual from here on
// (launch_ranks starts its ranks with them blocked, common/stop_signal.h).
struct GroupRank {
  GroupRank(const GroupOptions& opts, const std::string& output, bool stop_signals = false);
  const GroupPlace place;
  GroupExchange exchange;
};

}  // namespace cae
