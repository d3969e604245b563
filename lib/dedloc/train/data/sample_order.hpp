// The order in which a peer draws a dataset's samples: pass after pass, each pass a fresh permutation drawn
// from (seed, pass). SplitMix64 (Steele et al. 2014) and a hand-written Fisher-Yates rather than
// std::shuffle, whose output the standard leaves to the library: the same seed gives the same order on
// every platform, so a run's batches can be replayed from its seed.
#pragma once

#include <cstdint>
#include <vector>

namespace dedloc::train {

class SampleOrder {
 public:
  SampleOrder(std::uint64_t samples, std::uint64_t seed) : seed_(seed), order_(samples), position_(samples) {}

  // The next sample id; a new permutation starts when the last one is used up.
  std::uint64_t next() {
    if (position_ == order_.size()) start_pass();
    return order_[position_++];
  }
  std::uint64_t pass() const { return pass_; }

 private:
  static std::uint64_t split_mix(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  void start_pass() {
    if (started_) ++pass_;
    started_ = true;
    for (std::uint64_t i = 0; i < order_.size(); ++i) order_[i] = i;
    std::uint64_t state = seed_ ^ (pass_ * 0xd1342543de82ef95ull + 0x5eed);
    for (std::uint64_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[split_mix(state) % i]);
    position_ = 0;
  }

  std::uint64_t seed_;
  std::vector<std::uint64_t> order_;
  std::size_t position_;
  std::uint64_t pass_ = 0;
  bool started_ = false;
};

}  // namespace dedloc::train
