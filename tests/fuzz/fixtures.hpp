// Fixed values the fuzz targets and their seed writer (make_seeds.cpp) agree on: the relay and clock that
// attach proofs are signed for, and the identity that signs owned DHT records, so that seeds carrying valid
// signatures lead the fuzzer past the signature checks.
#pragma once

#include <array>
#include <cstdint>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::fuzz {

inline crypto::PeerId fixed_peer_id(std::uint8_t fill) {
  std::array<std::uint8_t, crypto::PeerId::kSize> id{};
  id.fill(fill);
  return crypto::PeerId(id);
}

// relay_frames: the relay the proofs attach to, its clock and window.
inline crypto::PeerId relay_id() { return fixed_peer_id(0x7e); }
inline constexpr std::uint64_t kRelayClockMs = 1'800'000'000'000;
inline constexpr std::uint64_t kRelayWindowMs = 60'000;

// relay_frames and records: the identity that signs (from a fixed seed).
inline const crypto::Identity& identity() {
  static const crypto::Identity id = [] {
    std::array<std::uint8_t, 32> seed{};
    seed.fill(0x42);
    return crypto::Identity::from_seed(seed).value();
  }();
  return id;
}

// records: the validator's clock (unix seconds).
inline constexpr double kRecordsNow = 1.8e9;

}  // namespace dedloc::fuzz
