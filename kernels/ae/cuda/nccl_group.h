// One NCCL communicator over the ranks of a data-parallel run (kernels/ae/data_parallel.h).
//
// NCCL is loaded at run time (dlopen of libnccl.so.2): a build on a machine with NCCL's
// headers still runs everywhere, and only the multi-GPU options need the library (the
// CUDA toolkit's lib64, or a Python environment's nvidia/nccl/lib, on LD_LIBRARY_PATH).
// Never a hang: the id exchange and the communicator's creation have a deadline, and every
// wait on a stream that carries collectives polls NCCL's asynchronous error and a deadline,
// aborting the communicator and throwing a message that names the rank.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

namespace ae::cuda {

// True when libnccl.so.2 can be loaded; otherwise `why` says what the loader said.
bool nccl_available(std::string* why = nullptr);

class NcclGroup {
 public:
  // Rank 0 creates the unique id and hands it to the others through the launch folder
  // `rendezvous` (cae::share_nccl_id: its token, and the ranks' `agreement`). Throws
  // std::runtime_error when NCCL cannot be loaded, the id is another launch's, or the id or
  // the group does not come within `timeout_seconds`.
  NcclGroup(int rank, int world, const std::string& rendezvous, double timeout_seconds,
            const std::string& agreement = "");
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  std::string describe() const;  // "NCCL 2.28.3, rank 0 of 2"

  // In-place sums over the ranks, enqueued on `stream` (capturable into a CUDA graph).
  void all_reduce_sum(float* data, size_t count, cudaStream_t stream);
  void all_reduce_sum(const double* send, double* recv, size_t count, cudaStream_t stream);

  // Waits for `stream` like cudaStreamSynchronize, but stops with an error when NCCL
  // reports one or when nothing finishes within the timeout (a failed peer).
  void wait(cudaStream_t stream, const char* what);

 private:
  [[noreturn]] void fail(const std::string& why);
  int rank_, world_;
  double timeout_;
  void* comm_ = nullptr;  // ncclComm_t
  int version_ = 0;
};

}  // namespace ae::cuda
