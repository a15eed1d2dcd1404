// The implicit-GEMM engine (see layers_cuda.cuh, docs/GPU.md): conv_igemm.cu holds the
// convolution kernels and their epilogues, wgrad_igemm.cu the weight-gradient kernels;
// this file the shared entry points.
//
// Both kernels are classic multistage tensor-core GEMMs: a block computes a BM×BN tile,
// its warps WM×WN sub-tiles; each stage brings 64 bytes of the reduction per tile row into
// shared memory with cp.async (zero-fill for padding and out-of-image taps), three stages
// in flight; fragments come out of shared memory with ldmatrix and feed mma.sync (bf16
// m16n8k16 or tf32 m16n8k8, fp32 accumulators). What makes them convolutions is only
// the address computation of each 16-byte chunk: an im2col matrix is never written.
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/igemm_common.cuh"
#include "kernels/ae/cuda/layers_cuda.cuh"

namespace ae::cuda {

int ilog2_exact(int v, const char* what) {
  int l = 0;
  while ((1 << l) < v) ++l;
  if (v <= 0 || (1 << l) != v) throw std::invalid_argument(std::string(what) + " must be a power of two, got " + std::to_string(v));
  return l;
}

int channel_pitch(int channels) {
  if (channels < 1) throw std::invalid_argument("channel_pitch: need at least one channel, got " + std::to_string(channels));
  int p = 8;
  while (p < channels) p <<= 1;
  return p;
}

void init_kernels() {
  // Kernels using more than 48 KB of shared memory must say so once per device (the
  // attribute belongs to the device's context: ranks of a group may share a process);
  // done here, outside any stream capture.
  static std::mutex mu;
  static std::set<int> done;
  int device = 0;
  AE_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (!done.insert(device).second) return;
  igemm::init_conv_kernels();
  igemm::init_wgrad_kernels();
}

}  // namespace ae::cuda
