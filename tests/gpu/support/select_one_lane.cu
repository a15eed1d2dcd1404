#include "tests/gpu/support/select_one_lane.cuh"

#include <algorithm>
#include <stdexcept>

#include "common/cuda_check.cuh"
#include "kernels/svm/cuda/working_set_select.cuh"

namespace gpu_test {

using cae::cuda::DeviceBuffer;
using svm::cuda::kMaxWorkingSet;

SelectedWorkingSet select_one_lane(const double* d_alpha, const double* d_G, int n, int na, double Cp, double Cn,
                                   int q, const std::vector<int>& kept, cudaStream_t s) {
  if (n >= svm::cuda::kMaxPairRows || q < 2 || q > kMaxWorkingSet) throw std::invalid_argument("select_one_lane: sizes");
  const int chunks = svm::cuda::selection_chunks(n);
  const int64_t keys = 2 * int64_t{n};
  DeviceBuffer<uint64_t> d_keys(static_cast<size_t>(keys)), d_sorted(static_cast<size_t>(keys));
  DeviceBuffer<double> partial_up(static_cast<size_t>(chunks)), partial_low(static_cast<size_t>(chunks));
  svm::cuda::SelectionScratch scratch;
  scratch.keys = d_keys.get();
  scratch.sorted = d_sorted.get();
  scratch.sort_temp_bytes = svm::cuda::selection_sort_bytes(keys, s);
  DeviceBuffer<unsigned char> temp(std::max<size_t>(scratch.sort_temp_bytes, 1));
  scratch.sort_temp = temp.get();
  scratch.partial_up = partial_up.get();
  scratch.partial_low = partial_low.get();

  DeviceBuffer<svm::cuda::Readback> readback(1);
  DeviceBuffer<uint8_t> chosen(static_cast<size_t>(n));
  AE_CUDA_CHECK(cudaMemsetAsync(chosen.get(), 0, static_cast<size_t>(n), s));
  std::vector<int> kept_list(1, static_cast<int>(kept.size()));
  kept_list.insert(kept_list.end(), kept.begin(), kept.end());
  DeviceBuffer<int> d_kept(kept_list.size()), d_fresh(static_cast<size_t>(q) + 1);
  AE_CUDA_CHECK(cudaMemcpyAsync(d_kept.get(), kept_list.data(), sizeof(int) * kept_list.size(), cudaMemcpyHostToDevice, s));
  svm::cuda::Lane L;
  L.n = n;
  L.na = na;
  L.Cp = Cp;
  L.Cn = Cn;
  L.alpha = const_cast<double*>(d_alpha);
  L.G = const_cast<double*>(d_G);
  L.chosen = chosen.get();
  L.ws = readback.get()->ws;
  L.ws_count = &readback.get()->count;
  L.gap = readback.get()->gap;
  L.q = std::min(q, n);
  L.kept = d_kept.get();
  L.fresh = d_fresh.get();
  DeviceBuffer<svm::cuda::Lane> d_lane(1);
  AE_CUDA_CHECK(cudaMemcpyAsync(d_lane.get(), &L, sizeof(L), cudaMemcpyHostToDevice, s));
  svm::cuda::select_working_sets(d_lane.get(), 1, chunks, keys, scratch, s);

  svm::cuda::Readback rb;
  std::vector<int> fresh(static_cast<size_t>(q) + 1);
  AE_CUDA_CHECK(cudaMemcpyAsync(&rb, readback.get(), sizeof(rb), cudaMemcpyDeviceToHost, s));
  AE_CUDA_CHECK(cudaMemcpyAsync(fresh.data(), d_fresh.get(), sizeof(int) * fresh.size(), cudaMemcpyDeviceToHost, s));
  AE_CUDA_CHECK(cudaStreamSynchronize(s));
  SelectedWorkingSet out;
  out.ws.assign(rb.ws, rb.ws + rb.count);
  out.fresh.assign(fresh.begin() + 1, fresh.begin() + 1 + fresh[0]);
  out.m_up = rb.gap[0];
  out.m_low = rb.gap[1];
  return out;
}

}  // namespace gpu_test
