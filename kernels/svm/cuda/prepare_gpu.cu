// prepare_training_rows_gpu: the GPU twin of the part of preprocess.cpp's
// prepare_training_rows after the scaler, for a GPU fit. The host used to scale, mask and
// compact CIFAR-10's 50,000 × 8,192 rows in four passes over 1.6 GB (docs/DECISIONS.md,
// "svm-fit fits its scaler while the driver starts; …"), then upload them; now it fits the scaler (two of the passes) while the GPU's driver
// starts, the raw rows go up, and the other two passes run where the solver reads the rows
// (docs/SVM_GPU.md, "The rows prepared on the device").
//
// Every number that comes back is the CPU's bit for bit: each row's sums add its columns in
// order (a thread per row, over a tile in shared memory), each operation is spelled out as
// the CPU's (its multiply-adds are std::fma, so no compiler's contraction can differ), and
// the totals over the rows are the CPU's own functions (mean_of_row_sums,
// gamma_scale_of_row_sums) on the host.
#include <algorithm>
#include <future>
#include <memory>
#include <stdexcept>

#include <cuda_fp16.h>

#include "common/half.h"
#include "common/timer.h"
#include "kernels/svm/cuda/svm_gpu.cuh"
#include "kernels/svm/preprocess.h"

namespace svm {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// A block takes kTileRows rows and walks their columns in tiles of kThreads: thread c works
// on column c of the tile for every row (coalesced), and thread t < kTileRows then adds row
// t's tile to its running sum in column order, from shared memory (a row of 257 floats: the
// threads' rows fall in different banks).
constexpr int kTileRows = 32;
static_assert(kTileRows <= kThreads, "a thread per row of the tile");

enum class RowPass { scale, squared_deviation };

template <RowPass kPass>
__global__ void __launch_bounds__(kThreads) row_pass_kernel(float* __restrict__ X, int64_t n, int dim,
                                                            const double* __restrict__ mean,
                                                            const double* __restrict__ scale,
                                                            const float* __restrict__ scaled_row0,
                                                            uint8_t* __restrict__ differs, double deviation_from,
                                                            double* __restrict__ row_sum) {
  __shared__ float tile[kTileRows][kThreads + 1];
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int rows = n - r0 < kTileRows ? static_cast<int>(n - r0) : kTileRows;
  const int c = threadIdx.x;
  double running = 0;
  for (int f0 = 0; f0 < dim; f0 += kThreads) {
    const int f = f0 + c;
    if (f < dim) {
      if constexpr (kPass == RowPass::scale) {
        const double m = mean[f], s = scale[f];
        const float first = scaled_row0[f];
        bool differ = false;
        for (int r = 0; r < rows; ++r) {
          float* x = X + (r0 + r) * dim + f;
          // apply_scaler's arithmetic: x' = f32(f32(x − mean) / scale).
          const float centred = __double2float_rn(__dsub_rn(static_cast<double>(*x), m));
          const float v = __double2float_rn(__ddiv_rn(static_cast<double>(centred), s));
          *x = v;
          tile[r][c] = v;
          differ |= v != first;
        }
        if (differ && !differs[f]) differs[f] = 1;
      } else {
        for (int r = 0; r < rows; ++r) tile[r][c] = X[(r0 + r) * dim + f];
      }
    }
    __syncthreads();
    if (c < rows) {
      const int width = min(kThreads, dim - f0);
      for (int i = 0; i < width; ++i) {
        const double v = static_cast<double>(tile[c][i]);
        if constexpr (kPass == RowPass::scale) {
          running = __dadd_rn(running, v);
        } else {
          const double d = __dsub_rn(v, deviation_from);
          running = __fma_rn(d, d, running);
        }
      }
    }
    __syncthreads();
  }
  if (c < rows) row_sum[r0 + c] = running;
}

// float16 rows widened to floats (exact), eight values per thread and step.
__global__ void widen_halves_kernel(const uint4* __restrict__ in, float4* __restrict__ out, int64_t groups) {
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 h = in[g];
    const __half2* pair = reinterpret_cast<const __half2*>(&h);
    const float2 a = __half22float2(pair[0]), b = __half22float2(pair[1]);
    const float2 c = __half22float2(pair[2]), d = __half22float2(pair[3]);
    out[2 * g] = make_float4(a.x, a.y, b.x, b.y);
    out[2 * g + 1] = make_float4(c.x, c.y, d.x, d.y);
  }
}

__global__ void widen_halves_tail_kernel(const __half* __restrict__ in, float* __restrict__ out, int64_t begin,
                                         int64_t end) {
  const int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < end) out[i] = __half2float(in[i]);
}

__global__ void compact_rows_kernel(const float* __restrict__ X, const int64_t* __restrict__ places, int dim,
                                    const int* __restrict__ kept, int count, int64_t ld, float* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const float* src = X + r * dim;
  float* dst = out + places[r] * ld;
  for (int64_t i = threadIdx.x; i < ld; i += blockDim.x) dst[i] = i < count ? src[kept[i]] : 0.0f;
}

unsigned row_tiles(int64_t n) { return static_cast<unsigned>((n + kTileRows - 1) / kTileRows); }

template <typename T>
void download(std::vector<T>& dst, const T* src, size_t count, cudaStream_t s) {
  dst.resize(count);
  if (count) AE_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, s));
}

}  // namespace

void scale_rows(float* X, int64_t n, int dim, const double* mean, const double* scale, const float* scaled_row0,
                uint8_t* differs, double* row_sum, cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  row_pass_kernel<RowPass::scale>
      <<<row_tiles(n), kThreads, 0, stream>>>(X, n, dim, mean, scale, scaled_row0, differs, 0.0, row_sum);
  AE_CUDA_LAUNCH_CHECK();
}

void squared_deviation_sums(const float* X, int64_t n, int dim, double mean, double* row_sum, cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  row_pass_kernel<RowPass::squared_deviation><<<row_tiles(n), kThreads, 0, stream>>>(
      const_cast<float*>(X), n, dim, nullptr, nullptr, nullptr, nullptr, mean, row_sum);
  AE_CUDA_LAUNCH_CHECK();
}

void widen_halves(const cae::Half* in, float* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const int64_t groups = count / 8;  // DeviceBuffer's allocations are 256-byte aligned
  if (groups > 0) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((groups + kThreads - 1) / kThreads, 65536));
    widen_halves_kernel<<<blocks, kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(in),
                                                         reinterpret_cast<float4*>(out), groups);
    AE_CUDA_LAUNCH_CHECK();
  }
  if (groups * 8 < count) {
    widen_halves_tail_kernel<<<1, 8, 0, stream>>>(reinterpret_cast<const __half*>(in), out, groups * 8, count);
    AE_CUDA_LAUNCH_CHECK();
  }
}

void compact_rows(const float* X, const int64_t* places, int64_t n, int dim, const int* kept, int count, int64_t ld,
                  float* out, cudaStream_t stream) {
  if (n <= 0) return;
  if (count > ld) throw std::invalid_argument("compact_rows: a row stride shorter than the kept columns");
  compact_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(X, places, dim, kept, count, ld, out);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda

std::shared_ptr<DeviceRows> prepare_training_rows_gpu(RawRows X, const int32_t* y, int64_t n, int dim,
                                                     const Scaler& scaler, PreparedRows& out) {
  using namespace cuda;
  using cae::cuda::DeviceBuffer;
  if (n <= 0 || dim <= 0) throw std::invalid_argument("prepare_training_rows_gpu: no rows");
  if (scaler.mean.size() != static_cast<size_t>(dim) || scaler.scale.size() != static_cast<size_t>(dim))
    throw std::invalid_argument("prepare_training_rows_gpu: a scaler of another width");
  const size_t values = static_cast<size_t>(n) * static_cast<size_t>(dim);
  const int64_t raw_bytes = static_cast<int64_t>(values * sizeof(float));
  // float16 rows arrive in a buffer of their own, freed once widened, before the rows' buffer.
  const int64_t arriving_bytes = X.f16 ? static_cast<int64_t>(values * sizeof(cae::Half)) : 0;
  const int64_t rows_bytes = n * device_row_stride(dim) * static_cast<int64_t>(sizeof(float));
  if (raw_bytes + std::max(arriving_bytes, rows_bytes) + kDeviceReserveBytes > free_device_bytes()) return nullptr;

  cae::Stopwatch clock;
  const Stream stream;
  const cudaStream_t s = stream.get();
  auto sync = [&] { stream.sync(); };
  auto rows = std::make_shared<DeviceRows>();

  // The raw rows go up page-locked, float16 in half the bytes (then widened here); the lock
  // is released on another thread while the GPU works (unlocking a gigabyte is not free),
  // joined when the rows are spent.
  DeviceBuffer<float> d_raw(values);
  {
    const void* host = X.f16 ? static_cast<const void*>(X.f16) : static_cast<const void*>(X.f32);
    const size_t bytes = X.f16 ? static_cast<size_t>(arriving_bytes) : static_cast<size_t>(raw_bytes);
    auto pinned = std::make_unique<cae::cuda::PinnedRange>(host, bytes);
    if (X.f16) {
      DeviceBuffer<cae::Half> d_halves(values);
      AE_CUDA_CHECK(cudaMemcpyAsync(d_halves.get(), host, bytes, cudaMemcpyHostToDevice, s));
      widen_halves(d_halves.get(), d_raw.get(), static_cast<int64_t>(values), s);
      sync();
    } else {
      AE_CUDA_CHECK(cudaMemcpyAsync(d_raw.get(), host, bytes, cudaMemcpyHostToDevice, s));
      sync();
    }
    rows->unlocked = std::async(std::launch::async, [lock = std::move(pinned)]() mutable { lock.reset(); });
  }
  PreparedRows p;
  p.scaler = scaler;
  p.keep.assign(static_cast<size_t>(dim), 0);
  DeviceBuffer<double> d_mean(static_cast<size_t>(dim)), d_scale(static_cast<size_t>(dim));
  AE_CUDA_CHECK(cudaMemcpyAsync(d_mean.get(), p.scaler.mean.data(), sizeof(double) * dim, cudaMemcpyHostToDevice, s));
  AE_CUDA_CHECK(cudaMemcpyAsync(d_scale.get(), p.scaler.scale.data(), sizeof(double) * dim, cudaMemcpyHostToDevice, s));
  // Row 0 scaled on the host: the value every row is compared with, and the dropped
  // features' values.
  std::vector<float> row0(static_cast<size_t>(dim));
  if (X.f16) cae::halves_to_floats(X.f16, row0.data(), static_cast<size_t>(dim));
  else std::copy(X.f32, X.f32 + dim, row0.begin());
  apply_scaler(p.scaler, row0.data(), 1, dim);
  DeviceBuffer<float> d_row0(static_cast<size_t>(dim));
  DeviceBuffer<uint8_t> d_differs(static_cast<size_t>(dim));
  DeviceBuffer<double> d_row_sum(static_cast<size_t>(n));
  AE_CUDA_CHECK(cudaMemcpyAsync(d_row0.get(), row0.data(), sizeof(float) * dim, cudaMemcpyHostToDevice, s));
  AE_CUDA_CHECK(cudaMemsetAsync(d_differs.get(), 0, static_cast<size_t>(dim), s));
  scale_rows(d_raw.get(), n, dim, d_mean.get(), d_scale.get(), d_row0.get(), d_differs.get(), d_row_sum.get(), s);
  std::vector<double> row_sum;
  download(row_sum, d_row_sum.get(), static_cast<size_t>(n), s);
  download(p.keep, d_differs.get(), static_cast<size_t>(dim), s);
  sync();
  const double mean = mean_of_row_sums(row_sum, dim);
  squared_deviation_sums(d_raw.get(), n, dim, mean, d_row_sum.get(), s);
  download(row_sum, d_row_sum.get(), static_cast<size_t>(n), s);

  const std::vector<int> kept = kept_columns(p.keep);
  for (int f = 0; f < dim; ++f)
    if (!p.keep[f]) p.dropped_values.push_back(row0[static_cast<size_t>(f)]);
  p.kept = static_cast<int>(kept.size());
  rows->n = n;
  rows->dim = p.kept;
  rows->ld = device_row_stride(p.kept);
  if (p.kept > 0) {
    rows->X.resize(static_cast<size_t>(n * rows->ld));
    const std::vector<int64_t> place = class_sorted_places(y, n);
    DeviceBuffer<int64_t> d_place(place.size());
    DeviceBuffer<int> d_kept(kept.size());
    AE_CUDA_CHECK(
        cudaMemcpyAsync(d_place.get(), place.data(), sizeof(int64_t) * place.size(), cudaMemcpyHostToDevice, s));
    AE_CUDA_CHECK(cudaMemcpyAsync(d_kept.get(), kept.data(), sizeof(int) * kept.size(), cudaMemcpyHostToDevice, s));
    compact_rows(d_raw.get(), d_place.get(), n, dim, d_kept.get(), p.kept, rows->ld, rows->X.get(), s);
  }
  sync();
  p.gamma_scale = gamma_scale_of_row_sums(row_sum, dim);
  out = std::move(p);
  rows->seconds = clock.seconds();
  return rows;
}

}  // namespace svm
