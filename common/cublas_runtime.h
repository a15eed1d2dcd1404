// cuBLAS, loaded when the GPU SVM first needs it instead of when a tool starts.
//
// libcublas and libcublasLt are ~700 MB of shared objects; linked the usual way, the
// dynamic loader maps and relocates them before main() of every tool that can reach the
// GPU SVM — most of svm-fit's, svm-eval's and classify's start-up on a CPU run that never
// calls them (docs/DECISIONS.md, "cuBLAS loaded at run time (dlopen)"). Loaded
// here with dlopen instead: a CPU run never pays, and a GPU run starts the load in the
// background (preload) while it reads its inputs.
#pragma once

#include "common/device.h"

namespace cae {
struct GroupPlace;  // common/group.h
}

#ifdef CIFARAE_WITH_CUDA
#include <cublas_v2.h>

namespace cae::cublas {

// The entry points the toolkit calls, with cuBLAS's own signatures (the _v2 symbols that
// cublas_v2.h's names stand for).
struct Api {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  decltype(&::cublasSetMathMode) set_math_mode;
  decltype(&::cublasGetStatusString) status_string;
  decltype(&::cublasSgemm_v2) sgemm;
  decltype(&::cublasDgemm_v2) dgemm;
  // cublasGemmEx's C signature (C++ also sees an overload taking cudaDataType as the compute type).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
};

// The library, loaded once (thread-safe). Throws std::runtime_error naming the library and
// dlerror()'s reason when it cannot be loaded or lacks a symbol.
const Api& api();

}  // namespace cae::cublas
#endif

namespace cae::cublas {
// Starts api()'s load on a background thread and returns at once; api() then waits for it.
// Starts GPU `gpu`'s context too (start_gpu_context, common/device.h): cuBLAS's tools need it
// as well. Called as soon as the tool's options are parsed, with the GPU it will use (0, or
// select_group_gpu's; not before it starts its ranks): --device cpu starts nothing; gpu and
// auto load once the driver has found a GPU (nothing without one). Without CUDA it does
// nothing.
void preload(const DeviceChoice& device, int gpu);
// preload() for a tool that may be a rank of a group (svm-fit, svm-eval): GPU 0 outside a
// group; on a group rank whose device is a GPU, the rank's own (select_group_gpu, which also
// makes it current), so a rank waits for the driver's answer here.
void preload(const DeviceChoice& device, const GroupPlace& place);
// Waits for a load that preload() started, if any. The tools call it before they return from
// main: exit() tears down the CUDA runtime that libcublas's initialisers call into, and a
// tool that fails on its input before it needs cuBLAS would otherwise exit while the
// background thread is still inside dlopen (a crash after the tool's error line).
void settle();
}  // namespace cae::cublas
