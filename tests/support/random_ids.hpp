// 160-bit ids for DHT tests: random ones, reproducible from the test's seeded generator, and numbered ones.
#pragma once

#include <array>
#include <random>

#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::test {

inline crypto::PeerId random_id(std::mt19937_64& rng) {
  std::array<std::uint8_t, crypto::PeerId::kSize> bytes{};
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  return crypto::PeerId(bytes);
}

// The id whose first byte is `n` and the rest zero: distinct, readable ids for tests that name a few.
inline crypto::PeerId numbered_id(std::uint8_t n) {
  std::array<std::uint8_t, crypto::PeerId::kSize> bytes{};
  bytes[0] = n;
  return crypto::PeerId(bytes);
}

}  // namespace dedloc::test
