// The benchmark's vectors: member i holds (i+1)·g(k) and weighs i+1, so that every peer can check its
// result against c·g(k), c = Σ(i+1)²/Σ(i+1), in one pass after the timed part, and restore its own values
// for the next round in the same pass. g(k) folds the bits of k into [-1, 1): cheap enough to recompute on
// every check instead of keeping a reference copy.
#pragma once

#include <span>

namespace dedloc::avg::bench {

// vector[k] = factor · g(k).
void fill_synthetic(std::span<float> vector, float factor);

struct SyntheticCheck {
  double max_abs_error = 0;  // +inf when a value is NaN or inf
  double scale = 0;          // max |expected|
};

// Compares `vector` with mean·g(k) and refills it with own·g(k) for the next round, in one pass. The
// expected value is computed in f32 (adds at most 2^-24 relative, far inside every tolerance).
SyntheticCheck check_and_refill(std::span<float> vector, double mean, float own);

}  // namespace dedloc::avg::bench
