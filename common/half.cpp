#include "common/half.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

namespace cae {

uint16_t float_to_half_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // ≥ 65520 (ties to even: Inf) or Inf
  if (a < 0x38800000u) {  // below 2^-14: a multiple of binary16's subnormal step 2^-24, or 0
    float m;
    std::memcpy(&m, &a, sizeof m);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(m * 16777216.0f)));  // exact product
  }
  uint32_t r = a - 0x38000000u;  // the exponent's bias 127 → 15
  r += 0xfffu + ((r >> 13) & 1u);  // round the 13 dropped bits to nearest, ties to even (a carry bumps the exponent)
  return static_cast<uint16_t>(sign | (r >> 13));
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m · 2^-24, exact in float
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  const uint32_t u = sign | (e == 31 ? (0xffu << 23) | (m << 13) : ((e + 112u) << 23) | (m << 13));
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

namespace {

constexpr size_t kParallelFrom = size_t{1} << 18;  // below: one thread (a parallel region costs more)

// Converts [begin, end); the first index without a finite binary16, or `end`.
size_t to_halves(const float* in, Half* out, size_t begin, size_t end) {
  size_t bad = end;
  size_t i = begin;
#if defined(__F16C__) && defined(__AVX__)
  const __m128i exponent = _mm_set1_epi16(0x7c00);
  for (; i + 8 <= end; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    // An all-ones exponent is Inf or NaN: a value beyond the range, or not finite to begin with.
    if (bad == end && _mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, exponent), exponent)))
      for (size_t j = i; j < i + 8 && bad == end; ++j)
        if ((out[j].bits & 0x7c00u) == 0x7c00u) bad = j;
  }
#endif
  for (; i < end; ++i) {
    out[i].bits = float_to_half_bits(in[i]);
    if (bad == end && (out[i].bits & 0x7c00u) == 0x7c00u) bad = i;
  }
  return bad;
}

void to_floats(const Half* in, float* out, size_t begin, size_t end) {
  size_t i = begin;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= end; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
#endif
  for (; i < end; ++i) out[i] = half_bits_to_float(in[i].bits);
}

// Blocks of 64 KB of floats, so that every thread's share starts on a block.
constexpr size_t kBlock = size_t{1} << 14;

}  // namespace

size_t floats_to_halves(const float* in, Half* out, size_t n) {
  if (n < kParallelFrom) return to_halves(in, out, 0, n);
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
  size_t bad = n;
#pragma omp parallel for schedule(static) reduction(min : bad)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t begin = static_cast<size_t>(b) * kBlock, end = std::min(n, begin + kBlock);
    const size_t first = to_halves(in, out, begin, end);
    if (first != end) bad = std::min(bad, first);
  }
  return bad;
}

void halves_to_floats(const Half* in, float* out, size_t n) {
  if (n < kParallelFrom) return to_floats(in, out, 0, n);
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const size_t begin = static_cast<size_t>(b) * kBlock;
    to_floats(in, out, begin, std::min(n, begin + kBlock));
  }
}

size_t round_to_half(float* x, size_t n) {
  // In place a block at a time through a small buffer of halves per thread.
  const int64_t blocks = static_cast<int64_t>((n + kBlock - 1) / kBlock);
  size_t bad = n;
#pragma omp parallel for schedule(static) reduction(min : bad) if (n >= kParallelFrom)
  for (int64_t b = 0; b < blocks; ++b) {
    Half h[kBlock];
    const size_t begin = static_cast<size_t>(b) * kBlock, end = std::min(n, begin + kBlock);
    const size_t first = to_halves(x + begin, h, 0, end - begin);
    if (first != end - begin) bad = std::min(bad, begin + first);
    to_floats(h, x + begin, 0, end - begin);
  }
  return bad;
}

}  // namespace cae
