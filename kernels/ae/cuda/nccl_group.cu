#include "kernels/ae/cuda/nccl_group.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/cuda_check.cuh"
#include "common/group.h"

// The few NCCL types this file needs, as NCCL's ABI defines them (nccl.h is not needed to
// build: the library is loaded at run time). These values are part of NCCL 2.x's stable ABI.
namespace {
struct ncclComm;
using ncclComm_t = ncclComm*;
constexpr int kNcclUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};
enum ncclResult_t { ncclSuccess = 0, ncclInProgress = 7 };
enum ncclDataType_t { ncclFloat32 = 7, ncclFloat64 = 8 };
enum ncclRedOp_t { ncclSum = 0 };

struct NcclApi {
  ncclResult_t (*GetVersion)(int*);
  ncclResult_t (*GetUniqueId)(ncclUniqueId*);
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  const char* (*GetErrorString)(ncclResult_t);
  std::string error;  // why the library could not be loaded; empty when it was
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a{};
    // Connect every peer when a communicator forms, not at its first collective (NCCL's
    // default since 2.22): the step's all-reduces are captured into a CUDA graph, and a
    // connection cannot be made during a capture. Set before the library reads its
    // environment; a value the user set wins. GpuBackend also runs each captured
    // collective once eagerly, for NCCL versions that connect some transports lazily anyway.
    setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      a.error = std::string("cannot load libnccl.so.2 (") + (e ? e : "unknown") +
                "): install NCCL or put its lib folder on LD_LIBRARY_PATH";
      return a;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p && a.error.empty()) a.error = std::string("libnccl.so.2 lacks ") + name + " (NCCL 2.x needed)";
      return p;
    };
    a.GetVersion = reinterpret_cast<decltype(a.GetVersion)>(sym("ncclGetVersion"));
    a.GetUniqueId = reinterpret_cast<decltype(a.GetUniqueId)>(sym("ncclGetUniqueId"));
    a.CommInitRank = reinterpret_cast<decltype(a.CommInitRank)>(sym("ncclCommInitRank"));
    a.CommDestroy = reinterpret_cast<decltype(a.CommDestroy)>(sym("ncclCommDestroy"));
    a.CommAbort = reinterpret_cast<decltype(a.CommAbort)>(sym("ncclCommAbort"));
    a.CommGetAsyncError = reinterpret_cast<decltype(a.CommGetAsyncError)>(sym("ncclCommGetAsyncError"));
    a.AllReduce = reinterpret_cast<decltype(a.AllReduce)>(sym("ncclAllReduce"));
    a.GetErrorString = reinterpret_cast<decltype(a.GetErrorString)>(sym("ncclGetErrorString"));
    return a;
  }();
  return api;
}

const NcclApi& nccl_or_throw() {
  const NcclApi& a = nccl();
  if (!a.error.empty()) throw std::runtime_error("multi-GPU training needs NCCL: " + a.error);
  return a;
}

std::string nccl_error(ncclResult_t r) {
  const NcclApi& a = nccl();
  return a.GetErrorString ? a.GetErrorString(r) : "NCCL error " + std::to_string(int(r));
}

// Kills the process when `seconds` pass before disarm(): the one wait NCCL gives no
// deadline for is ncclCommInitRank, which blocks until every rank joined.
class InitDeadline {
 public:
  InitDeadline(double seconds, std::string message) : message_(std::move(message)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "%s\n", message_.c_str());
        std::fflush(stderr);
        _exit(1);
      }
    });
  }
  ~InitDeadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string message_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

namespace ae::cuda {

bool nccl_available(std::string* why) {
  const NcclApi& a = nccl();
  if (why) *why = a.error;
  return a.error.empty();
}

NcclGroup::NcclGroup(int rank, int world, const std::string& rendezvous, double timeout_seconds,
                     const std::string& agreement)
    : rank_(rank), world_(world), timeout_(timeout_seconds) {
  const NcclApi& api = nccl_or_throw();
  if (world < 1 || rank < 0 || rank >= world) throw std::invalid_argument("NcclGroup: bad rank/world");
  if (rendezvous.empty()) throw std::invalid_argument("NcclGroup: no rendezvous folder");
  api.GetVersion(&version_);
  ncclUniqueId id{};
  std::vector<unsigned char> mine;
  if (rank == 0) {
    ncclResult_t r = api.GetUniqueId(&id);
    if (r != ncclSuccess) throw std::runtime_error("rank 0: ncclGetUniqueId: " + nccl_error(r));
    mine.assign(id.internal, id.internal + kNcclUniqueIdBytes);
  }
  // Through the launch's own folder and token: an id another launch left is refused, not joined.
  const std::vector<unsigned char> bytes =
      cae::share_nccl_id(rank, world, rendezvous, timeout_seconds, agreement, mine, kNcclUniqueIdBytes);
  std::copy(bytes.begin(), bytes.end(), id.internal);
  ncclComm_t comm = nullptr;
  {
    InitDeadline deadline(timeout_seconds, "rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                               ": the NCCL group did not form within " +
                                               std::to_string(int(timeout_seconds)) + " s (a rank failed to start)");
    const ncclResult_t r = api.CommInitRank(&comm, world, id, rank);
    if (r != ncclSuccess)
      throw std::runtime_error("rank " + std::to_string(rank) + ": ncclCommInitRank: " + nccl_error(r));
  }
  comm_ = comm;
}

NcclGroup::~NcclGroup() {
  if (comm_) nccl().CommDestroy(static_cast<ncclComm_t>(comm_));
}

std::string NcclGroup::describe() const {
  const int major = version_ / 10000, minor = (version_ / 100) % 100, patch = version_ % 100;
  return "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) + ", rank " +
         std::to_string(rank_) + " of " + std::to_string(world_);
}

void NcclGroup::all_reduce_sum(float* data, size_t count, cudaStream_t stream) {
  const ncclResult_t r =
      nccl().AllReduce(data, data, count, ncclFloat32, ncclSum, static_cast<ncclComm_t>(comm_), stream);
  if (r != ncclSuccess && r != ncclInProgress) fail("ncclAllReduce: " + nccl_error(r));
}

void NcclGroup::all_reduce_sum(const double* send, double* recv, size_t count, cudaStream_t stream) {
  const ncclResult_t r =
      nccl().AllReduce(send, recv, count, ncclFloat64, ncclSum, static_cast<ncclComm_t>(comm_), stream);
  if (r != ncclSuccess && r != ncclInProgress) fail("ncclAllReduce: " + nccl_error(r));
}

void NcclGroup::wait(cudaStream_t stream, const char* what) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) AE_CUDA_CHECK(e);
    ncclResult_t async = ncclSuccess;
    nccl().CommGetAsyncError(static_cast<ncclComm_t>(comm_), &async);
    if (async != ncclSuccess && async != ncclInProgress)
      fail(std::string(what) + ": NCCL reports " + nccl_error(async) + " (another rank failed?)");
    if (clock::now() > deadline)
      fail(std::string(what) + ": no progress for " + std::to_string(int(timeout_)) +
           " s (another rank stopped or hangs)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, decltype(pause)(2000));
  }
}

void NcclGroup::fail(const std::string& why) {
  if (comm_) nccl().CommAbort(static_cast<ncclComm_t>(comm_));
  comm_ = nullptr;
  throw std::runtime_error("rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ": " + why);
}

}  // namespace ae::cuda
