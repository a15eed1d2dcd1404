// Programmatic dependent launch (Hopper and later; docs/GPU.md, "Overlapped launches"): every
// kernel of the autoencoder is launched with launch() below, which lets it start while the
// kernel before it on its stream is still finishing; the kernel then runs its prologue (index
// decoding, no memory access) and calls wait() before it touches memory. In a captured CUDA
// graph the same holds between consecutive kernel nodes of one stream.
//
// The rules that keep it exact: every kernel launched this way calls wait() before its
// first global load or store and before any return, so that it completes only after its
// predecessor did (which makes the order transitive along the stream); trigger() may come
// first, since a dependent still waits for this whole grid to finish.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "common/cuda_check.cuh"

namespace ae::cuda::pdl {

// Lets the next kernel of the stream be scheduled once every block of this grid has run it
// (or exited).
__device__ __forceinline__ void trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Waits until the previous kernel of the stream has completed and its writes are visible
// (returns at once when this kernel was not launched programmatically).
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), allowed to overlap the previous kernel.
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  AE_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace ae::cuda::pdl
