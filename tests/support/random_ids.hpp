// Random 160-bit ids for DHT tests, reproducible from the test's seeded generator.
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

}  // namespace dedloc::test
