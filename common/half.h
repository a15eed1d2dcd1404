// IEEE 754 binary16 ("half", numpy's float16): the element type of the features files
// ae-encode writes by default and of the support vectors svm-fit fits on them
// (docs/DECISIONS.md, "Features stored as float16"), and its conversions from and to float32.
// The HDF5 type is the one h5py writes for float16 (common/hdf5_io.h, H5Type<Half>).
#pragma once
#include <cstddef>
#include <cstdint>

namespace cae {

struct Half {
  uint16_t bits;
};
static_assert(sizeof(Half) == 2, "Half is two bytes");

// The smallest magnitude that rounds to Inf (the largest finite binary16 is 65504).
inline constexpr float kHalfOverflow = 65520.0f;

uint16_t float_to_half_bits(float x);  // nearest, ties to even (NaN stays NaN, beyond range Inf)
float half_bits_to_float(uint16_t h);  // exact

// Rounds n floats to the nearest binary16 (ties to even), on every core for large n (F16C
// where the build targets it). Returns the index of the first value that has no finite
// binary16 (NaN, ±Inf, or |x| ≥ 65520), or n when every value fits.
size_t floats_to_halves(const float* in, Half* out, size_t n);
// Exact; every core for large n.
void halves_to_floats(const Half* in, float* out, size_t n);
// x[i] = the float of x[i]'s binary16 rounding (what a float16 file would give back);
// returns as floats_to_halves.
size_t round_to_half(float* x, size_t n);

}  // namespace cae
