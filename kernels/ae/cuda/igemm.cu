// The implicit-GEMM engine (see ops.cuh, docs/GPU.md): conv_igemm.cu holds the
// convolution kernels and their epilogues, wgrad_igemm.cu the weight-gradient kernels;
// this file the shared entry points.
//
// Both kernels are classic multistage tensor-core GEMMs: a block computes a BM×BN tile,
// its warps WM×WN sub-tiles; each stage brings 64 bytes of the reduction per tile row into
// shared memory with cp.async (zero-fill for padding and out-of-image taps), three stages
// in flight; fragments come out of shared memory with ldmatrix and feed mma.sync (bf16
// m16n8k16 or tf32 m16n8k8, fp32 accumulators). What makes them convolutions is only
// the address computation of each 16-byte chunk: an im2col matrix is never written.
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/cuda_check.cuh"
#include "kernels/ae/cuda/igemm_common.cuh"
#include "kernels/ae/cuda/ops.cuh"

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

namespace igemm {

void allow_dynamic_smem(const void* kernel, int bytes) {
  if (bytes <= 48 * 1024) return;  // the default limit
  // The attribute belongs to the device's context (ranks of a group may share a process),
  // so it is remembered per (kernel, device). Asked at a kernel's first use, so that no list
  // of the ~150 instantiations has to be kept, nor run before a graph capture: inside one
  // it is allowed, being no stream operation (docs/DECISIONS.md).
  int device = 0;
  AE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> allowed;
  std::lock_guard<std::mutex> lock(mu);
  int& limit = allowed[{kernel, device}];
  if (limit >= bytes) return;
  AE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  limit = bytes;
}

}  // namespace igemm

}  // namespace ae::cuda
