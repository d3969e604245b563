// SplitMix64 (Steele et al. 2014): tiny, fast and fully specified, so that every platform draws the same
// numbers from a seed (std::shuffle and the std distributions do not promise that). A run's batches, masks
// and sample orders are functions of its seeds alone, and can be replayed.
#pragma once

#include <cstdint>

namespace dedloc::train {

class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::uint64_t below(std::uint64_t n) { return next() % n; }                // [0, n); bias < n / 2^64

 private:
  std::uint64_t state_;
};

// A seed derived from two numbers (a seed and a pass, a pass and a sample id).
inline std::uint64_t mix_seeds(std::uint64_t a, std::uint64_t b) { return SplitMix(a ^ (b * 0xd1342543de82ef95ull + 1)).next(); }

}  // namespace dedloc::train
