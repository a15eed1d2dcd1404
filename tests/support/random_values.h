// Integer-valued test data: n values drawn uniformly from lo..hi as T. With lo > 0 none is
// zero (tests never run on all-zero data), and a few distinct values let deflate compress.
#pragma once
#include <cstddef>
#include <random>
#include <vector>

namespace cae_test {

template <typename T>
std::vector<T> random_values(size_t n, int lo, int hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(pick(rng));
  return v;
}

}  // namespace cae_test
