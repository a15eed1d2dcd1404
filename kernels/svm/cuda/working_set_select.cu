// The selection of working_set_select.cuh: violations as sort keys, one radix sort, a block
// per lane taking its set as select_working_set (cpu/working_set.cpp) takes it.
#include "kernels/svm/cuda/working_set_select.cuh"

#include <cub/cub.cuh>

#include <climits>
#include <limits>

#include "common/cuda_check.cuh"

namespace svm::cuda {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kSelectThreads = kMaxWorkingSet;
constexpr int kKeyThreads = 256, kKeysPerThread = 8, kKeysPerBlock = kKeyThreads * kKeysPerThread;
constexpr int kIndexBits = kSortIndexBits;
// The sort key of a variable: [segment: 8 bits][violation, descending: 32 bits][index: 24
// bits], so one ascending radix sort orders every lane's two lists at once, each by its
// violation rounded to float, largest first, ties to the smaller index (the CPU's rule).

struct Larger {
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

__device__ __forceinline__ uint32_t descending_bits(float f) {
  if (f == 0.0f) f = 0.0f;  // −0 ties with +0, as in the CPU's comparison
  uint32_t u = __float_as_uint(f);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending order of u = ascending f
  return ~u;
}
__device__ __forceinline__ uint64_t sort_key(int segment, float violation, int t) {
  return (static_cast<uint64_t>(segment) << 56) | (static_cast<uint64_t>(descending_bits(violation)) << kIndexBits) |
         static_cast<uint64_t>(t);
}
__device__ __forceinline__ bool key_is_member(uint64_t key) {
  return static_cast<uint32_t>(key >> kIndexBits) != descending_bits(-INFINITY);
}
__device__ __forceinline__ int key_index(uint64_t key) { return static_cast<int>(key & ((1u << kIndexBits) - 1)); }

// Block (chunk, lane): the keys of kKeysPerBlock variables and their largest violations, exact
// in double, to partial[lane][chunk].
__global__ void __launch_bounds__(kKeyThreads) violation_keys_kernel(const Lane* __restrict__ lanes,
                                                                     uint64_t* __restrict__ keys, double* partial_up,
                                                                     double* partial_low, int chunks) {
  using Reduce = cub::BlockReduce<double, kKeyThreads>;
  __shared__ typename Reduce::TempStorage temp;
  const int l = blockIdx.y;
  const Lane L = lanes[l];
  double up_max = -kInf, low_max = -kInf;
  const int t0 = blockIdx.x * kKeysPerBlock;
  for (int k = 0; k < kKeysPerThread; ++k) {
    const int t = t0 + k * kKeyThreads + threadIdx.x;
    if (t >= L.n) break;
    const bool positive = t < L.na;
    const double a = L.alpha[t], C = positive ? L.Cp : L.Cn, yG = positive ? L.G[t] : -L.G[t];
    const bool up = positive ? a < C : a > 0, low = positive ? a > 0 : a < C;
    if (up) up_max = fmax(up_max, -yG);
    if (low) low_max = fmax(low_max, yG);
    keys[L.key_offset + t] = sort_key(2 * l, up ? __double2float_rn(-yG) : -INFINITY, t);
    keys[L.key_offset + L.n + t] = sort_key(2 * l + 1, low ? __double2float_rn(yG) : -INFINITY, t);
  }
  up_max = Reduce(temp).Reduce(up_max, Larger());
  __syncthreads();
  low_max = Reduce(temp).Reduce(low_max, Larger());
  if (threadIdx.x == 0) {
    partial_up[l * chunks + blockIdx.x] = up_max;
    partial_low[l * chunks + blockIdx.x] = low_max;
  }
}

// One block per lane: the working set from its two sorted lists, as select_working_set takes
// it — the first q/2 of I_up, then I_low's not yet taken, then I_up's again — ascending.
__global__ void __launch_bounds__(kSelectThreads) select_kernel(const Lane* __restrict__ lanes,
                                                                const uint64_t* __restrict__ sorted,
                                                                const double* partial_up, const double* partial_low,
                                                                int chunks) {
  using Scan = cub::BlockScan<int, kSelectThreads>;
  using Reduce = cub::BlockReduce<double, kSelectThreads>;
  using Sort = cub::BlockRadixSort<int, kSelectThreads, 1>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
    typename Sort::TempStorage sort;
  } temp;
  __shared__ int ws[kMaxWorkingSet];
  __shared__ int s_taken;
  const Lane L = lanes[blockIdx.x];
  const int tid = threadIdx.x;

  double up = -kInf, low = -kInf;
  for (int c = tid; c < chunks; c += kSelectThreads) {
    up = fmax(up, partial_up[blockIdx.x * chunks + c]);
    low = fmax(low, partial_low[blockIdx.x * chunks + c]);
  }
  up = Reduce(temp.reduce).Reduce(up, Larger());
  __syncthreads();
  low = Reduce(temp.reduce).Reduce(low, Larger());
  if (tid == 0) {
    L.gap[0] = up;
    L.gap[1] = low;
  }
  __syncthreads();

  const uint64_t* up_list = sorted + L.key_offset;
  const uint64_t* low_list = up_list + L.n;
  // Each list's members come first (a non-member's key sorts after every member's).
  __shared__ int s_members[2];
  if (tid < 2) {
    const uint64_t* list = tid == 0 ? up_list : low_list;
    int lo = 0, hi = L.n;  // the first non-member
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (key_is_member(list[mid])) lo = mid + 1; else hi = mid;
    }
    s_members[tid] = lo;
  }
  __syncthreads();
  int count = 0;
  // Takes members of `list` from position `from` on, skipping chosen ones, until `limit` are
  // in the set or the members end; returns the position after the last one taken.
  auto take = [&](const uint64_t* list, int members, int from, int limit) {
    int at = from;
    while (count < limit && at < members) {
      const int i = at + tid;
      const int t = i < members ? key_index(list[i]) : -1;
      const int wanted = t >= 0 && !L.chosen[t] ? 1 : 0;
      int place = 0, wanted_total = 0;
      Scan(temp.scan).ExclusiveSum(wanted, place, wanted_total);
      const int room = limit - count;
      if (wanted && place < room) {
        ws[count + place] = t;
        L.chosen[t] = 1;
      }
      if (wanted && place == room - 1) s_taken = i + 1;
      __syncthreads();
      if (wanted_total >= room) {
        at = s_taken;
        count = limit;
      } else {
        count += wanted_total;
        at = min(at + kSelectThreads, members);
      }
      __syncthreads();
    }
    return at;
  };
  // The last round's fresh variables stay (at most q/2), then the fresh ones of this round.
  // At least two fresh: both sides' largest violators are in the set (cpu/working_set.cpp).
  const int kept = min(L.kept ? L.kept[0] : 0, min(L.q / 2, L.q - 2));
  for (int r = tid; r < kept; r += kSelectThreads) {
    ws[r] = L.kept[1 + r];
    L.chosen[ws[r]] = 1;
  }
  count = kept;
  __syncthreads();
  const int up_next = take(up_list, s_members[0], 0, kept + (L.q - kept) / 2);
  take(low_list, s_members[1], 0, L.q);
  take(up_list, s_members[0], up_next, L.q);
  if (L.fresh) {
    for (int r = kept + tid; r < count; r += kSelectThreads) L.fresh[1 + r - kept] = ws[r];
    if (tid == 0) L.fresh[0] = count - kept;
  }

  // Clear the marks and sort the set ascending.
  int item[1] = {INT_MAX};
  if (tid < count) {
    item[0] = ws[tid];
    L.chosen[item[0]] = 0;
  }
  Sort(temp.sort).Sort(item);
  if (tid < count) L.ws[tid] = item[0];
  if (tid == 0) *L.ws_count = count;
}

}  // namespace

int selection_chunks(int64_t n) { return static_cast<int>((n + kKeysPerBlock - 1) / kKeysPerBlock); }

size_t selection_sort_bytes(int64_t key_capacity, cudaStream_t s) {
  size_t temp = 0;
  AE_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp, static_cast<const uint64_t*>(nullptr),
                                               static_cast<uint64_t*>(nullptr), key_capacity, 0, 64, s));
  return temp;
}

void select_working_sets(const Lane* d_lanes, int lanes, int chunks, int64_t key_total, const SelectionScratch& x,
                         cudaStream_t s) {
  violation_keys_kernel<<<dim3(chunks, lanes), kKeyThreads, 0, s>>>(d_lanes, x.keys, x.partial_up, x.partial_low,
                                                                    chunks);
  AE_CUDA_LAUNCH_CHECK();
  size_t temp = x.sort_temp_bytes;
  AE_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(x.sort_temp, temp, x.keys, x.sorted, key_total, 0, 64, s));
  select_kernel<<<lanes, kSelectThreads, 0, s>>>(d_lanes, x.sorted, x.partial_up, x.partial_low, chunks);
  AE_CUDA_LAUNCH_CHECK();
}

}  // namespace svm::cuda
