// The order in which a peer draws a dataset's samples: pass after pass, each pass a fresh permutation drawn
// from (seed, pass) with SplitMix64 and a hand-written Fisher-Yates rather than std::shuffle, whose output
// the standard leaves to the library: the same seed gives the same order on every platform, so a run's
// batches can be replayed from its seed.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "dedloc/train/data/split_mix.hpp"

namespace dedloc::train {

class SampleOrder {
 public:
  SampleOrder(std::uint64_t samples, std::uint64_t seed) : seed_(seed), order_(samples), position_(samples) {}

  // The next sample id; a new permutation starts when the last one is used up.
  std::uint64_t next() {
    if (position_ == order_.size()) start_pass();
    return order_[position_++];
  }
  // The pass the last id came from (0 for the first).
  std::uint64_t pass() const { return pass_; }

 private:
  void start_pass() {
    if (started_) ++pass_;
    started_ = true;
    for (std::uint64_t i = 0; i < order_.size(); ++i) order_[i] = i;
    SplitMix rng(mix_seeds(seed_ ^ 0x5eed0fa1bea7ull, pass_));
    for (std::uint64_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
    position_ = 0;
  }

  std::uint64_t seed_;
  std::vector<std::uint64_t> order_;
  std::size_t position_;
  std::uint64_t pass_ = 0;
  bool started_ = false;
};

}  // namespace dedloc::train
