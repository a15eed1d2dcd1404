// What the implicit-GEMM kernels (conv_igemm.cu, wgrad_igemm.cu) share: the GPU's size
// and the accumulator helpers. Internal to kernels/ae/cuda.
#pragma once
#include <cuda_runtime.h>

#include "common/cuda_check.cuh"

namespace ae::cuda::igemm {

// Multiprocessors of the current device (asked once per process).
inline int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    AE_CUDA_CHECK(cudaGetDevice(&dev));
    AE_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    return v;
  }();
  return n;
}

// A warp's fp32 accumulators: MI×NI mma tiles of 16×8, four values per lane each.
template <int MI, int NI>
__device__ __forceinline__ void zero_acc(float (&acc)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.f;
}

// Lets `kernel` take up to `bytes` of dynamic shared memory on the current device (beyond
// 48 KB a kernel must ask). Called before each launch or occupancy query; asks the driver
// once per kernel and device.
void allow_dynamic_smem(const void* kernel, int bytes);
template <typename... Params>
void allow_dynamic_smem(void (*kernel)(Params...), int bytes) {
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
}

}  // namespace ae::cuda::igemm
