// PeerID: who a peer is, as 160 bits derived from its public key (BLAKE2b-160 of the ed25519 key).
// 160 bits is also the Kademlia key space, so a PeerID is directly a DHT node id.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dedloc/core/bytes.hpp"

namespace dedloc::crypto {

class PeerId {
 public:
  static constexpr size_t kSize = 20;

  PeerId() = default;  // all zero: "nobody" (e.g. an anonymous sender)
  explicit PeerId(const std::array<std::uint8_t, kSize>& bytes) : bytes_(bytes) {}

  // BLAKE2b-160 of the public key.
  static PeerId from_public_key(ByteSpan public_key);
  // From exactly 20 raw bytes (e.g. off the wire); nullopt otherwise.
  static std::optional<PeerId> from_bytes(ByteSpan bytes);
  // From the 40-character hex form.
  static std::optional<PeerId> parse(std::string_view text);

  const std::array<std::uint8_t, kSize>& bytes() const { return bytes_; }
  ByteSpan span() const { return {bytes_.data(), bytes_.size()}; }
  bool is_zero() const;
  std::string to_string() const;         // 40 hex characters
  std::string short_string() const;      // first 8 hex characters, for logs

  auto operator<=>(const PeerId&) const = default;

 private:
  std::array<std::uint8_t, kSize> bytes_{};
};

}  // namespace dedloc::crypto
