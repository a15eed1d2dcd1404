// cuSOLVER, loaded when the GPU first needs it, as cuBLAS is (common/cublas_runtime.h, and
// docs/DECISIONS.md, "cuBLAS loaded at run time (dlopen)"): libcusolver is ~140 MB that no
// CPU run and no exact SVM maps. Only the Nyström features call it (the map's
// eigendecomposition and the normal equations' Cholesky factorisation,
// kernels/svm/cuda/nystroem_gpu.cu), so it loads on that first call, not in the background.
#pragma once

#ifdef CIFARAE_WITH_CUDA
#include <cusolverDn.h>

namespace cae::cusolver {

// The entry points the toolkit calls, with cuSOLVER's own signatures.
struct Api {
  decltype(&::cusolverDnCreate) create;
  decltype(&::cusolverDnDestroy) destroy;
  decltype(&::cusolverDnSetStream) set_stream;
  decltype(&::cusolverDnDsyevd_bufferSize) dsyevd_buffer_size;
  decltype(&::cusolverDnDsyevd) dsyevd;
  decltype(&::cusolverDnDpotrf_bufferSize) dpotrf_buffer_size;
  decltype(&::cusolverDnDpotrf) dpotrf;
  decltype(&::cusolverDnDpotrs) dpotrs;
};

// The library, loaded once (thread-safe). Throws std::runtime_error naming the library and
// dlerror()'s reason when it cannot be loaded or lacks a symbol.
const Api& api();

}  // namespace cae::cusolver
#endif
