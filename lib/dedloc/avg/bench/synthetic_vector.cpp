#include "dedloc/avg/bench/synthetic_vector.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "dedloc/avg/float_ops.hpp"

namespace dedloc::avg::bench {
namespace {

// g(k), written four at a time (float_ops' vectors: the build's -O2 vectorizes no loop with a remainder) so
// that checking 64 MiB takes milliseconds, not a second.
using float_ops::Float4;
using Int4 = std::int32_t __attribute__((vector_size(16)));

inline Float4 pattern4(std::uint64_t k) {
  const std::int32_t base = static_cast<std::int32_t>(k & 0x7fffffff);
  Int4 i = Int4{base, base + 1, base + 2, base + 3};
  Int4 h = (i ^ (i >> 7) ^ (i >> 17)) & 0xffff;
  return __builtin_convertvector(h, Float4) * 0x1p-15f - 1.0f;
}

inline float pattern(std::uint64_t k) {
  const std::int32_t i = static_cast<std::int32_t>(k & 0x7fffffff);
  return static_cast<float>((i ^ (i >> 7) ^ (i >> 17)) & 0xffff) * 0x1p-15f - 1.0f;
}

}  // namespace

void fill_synthetic(std::span<float> vector, float factor) {
  size_t k = 0;
  for (; k + 4 <= vector.size(); k += 4) float_ops::store4(&vector[k], factor * pattern4(k));
  for (; k < vector.size(); ++k) vector[k] = factor * pattern(k);
}

SyntheticCheck check_and_refill(std::span<float> vector, double mean, float own) {
  const float m = static_cast<float>(mean);
  Float4 worst4 = {0, 0, 0, 0}, scale4 = {0, 0, 0, 0};
  // NaN is noted apart: a max over NaN keeps whichever operand the comparison picks, so a later finite
  // error in the same lane would replace it.
  Int4 nan4 = {0, 0, 0, 0};
  auto abs4 = [](Float4 x) { return x < 0 ? -x : x; };
  size_t k = 0;
  for (; k + 4 <= vector.size(); k += 4) {
    const Float4 g = pattern4(k);
    const Float4 expected = m * g;
    const Float4 error = abs4(float_ops::load4(&vector[k]) - expected);
    nan4 |= error != error;
    worst4 = error <= worst4 ? worst4 : error;
    scale4 = abs4(expected) <= scale4 ? scale4 : abs4(expected);
    float_ops::store4(&vector[k], own * g);
  }
  bool nan = false;
  double worst = 0, scale = 0;
  auto keep = [&](double error, double expected) {
    nan = nan || std::isnan(error);
    worst = error <= worst ? worst : error;
    scale = std::max(scale, expected);
  };
  for (int lane = 0; lane < 4; ++lane) {
    nan = nan || nan4[lane] != 0;
    keep(worst4[lane], scale4[lane]);
  }
  for (; k < vector.size(); ++k) {
    const float g = pattern(k);
    keep(std::abs(vector[k] - m * g), std::abs(m * g));
    vector[k] = own * g;
  }
  SyntheticCheck check;
  check.max_abs_error = !nan && std::isfinite(worst) ? worst : std::numeric_limits<double>::infinity();
  check.scale = scale;
  return check;
}

}  // namespace dedloc::avg::bench
