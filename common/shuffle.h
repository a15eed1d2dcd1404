// Fisher–Yates shuffle with mt19937_64 drawn by hand. std::shuffle and the std
// distributions are implementation-defined, so the order one seed gives would differ between
// standard libraries; this one is the same everywhere (folds, epochs, splits).
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace cae {

// Position i − 1 (from the back) swaps with rng() % i; the modulo's bias is below i / 2^64.
template <typename T>
void fisher_yates_shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace cae
