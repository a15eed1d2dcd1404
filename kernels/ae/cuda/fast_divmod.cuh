// Division by a divisor fixed at launch, as a multiply and a shift (Granlund & Montgomery,
// "Division by invariant integers using multiplication", 1994; CUTLASS's FastDivmod does
// the same). The kernels decode GEMM rows into (image, y, x) for any image size; a
// hardware-free integer division costs ~20 instructions, this costs three, and for a
// power of two it gives exactly the old shift's result.
//
// For 0 ≤ n < 2^31 and d ≥ 1, with l = ceil(log2 d), p = 31 + l and m = ceil(2^p / d):
//   m·n / 2^p = n/d + e·n / (d·2^p) with 0 ≤ e = m·d − 2^p < d ≤ 2^l, and e·n < 2^p, so the
//   error term stays below 1/d and cannot carry floor(n/d) past the next integer.
// m < 2^32 for every d ≥ 1 (d > 2^(l−1)), so q = umulhi(n, m) >> (p − 32) — except d = 1,
// where p − 32 = −1: that case is q = n.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace ae::cuda {

struct FastDivmod {
  int d = 1;
  uint32_t mul = 0;
  uint32_t shr = 0;
  int log2 = -1;  // log2(d) when d is a power of two, else −1 (for divmod_pow2)

  FastDivmod() = default;
  explicit FastDivmod(int divisor) : d(divisor) {
    if (divisor < 1) throw std::invalid_argument("FastDivmod: divisor must be ≥ 1, got " + std::to_string(divisor));
    if ((divisor & (divisor - 1)) == 0)
      while ((int64_t(1) << (log2 + 1)) <= divisor) ++log2;
    if (divisor == 1) return;
    int l = 0;
    while ((int64_t(1) << l) < divisor) ++l;
    const int p = 31 + l;
    mul = uint32_t(((uint64_t(1) << p) + uint64_t(divisor) - 1) / uint64_t(divisor));
    shr = uint32_t(p - 32);
  }

  // n / d for 0 ≤ n < 2^31.
  __host__ __device__ __forceinline__ int div(int n) const {
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(uint32_t(n), mul);
#else
    const uint32_t hi = uint32_t((uint64_t(uint32_t(n)) * mul) >> 32);
#endif
    return d == 1 ? n : int(hi >> shr);
  }
  // q = n / d, r = n − q·d.
  __host__ __device__ __forceinline__ void divmod(int n, int& q, int& r) const {
    q = div(n);
    r = n - q * d;
  }
  // The same for a kernel specialised to power-of-two divisors (log2 ≥ 0): a shift and a
  // mask, two integer operations instead of four, where they sit on a gather's address path.
  template <bool POW2>
  __host__ __device__ __forceinline__ void divmod_as(int n, int& q, int& r) const {
    if constexpr (POW2) {
      q = n >> log2;
      r = n & (d - 1);
    } else {
      divmod(n, q, r);
    }
  }
};

}  // namespace ae::cuda
