#include "dedloc/crypto/peer_id.hpp"

#include <sodium.h>

#include <algorithm>

namespace dedloc::crypto {

PeerId PeerId::from_public_key(ByteSpan public_key) {
  std::array<std::uint8_t, kSize> out{};
  crypto_generichash(out.data(), out.size(), public_key.data(), public_key.size(), nullptr, 0);
  return PeerId(out);
}

std::optional<PeerId> PeerId::from_bytes(ByteSpan bytes) {
  if (bytes.size() != kSize) return std::nullopt;
  std::array<std::uint8_t, kSize> out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return PeerId(out);
}

std::optional<PeerId> PeerId::parse(std::string_view text) {
  auto raw = from_hex(text);
  if (!raw) return std::nullopt;
  return from_bytes(*raw);
}

bool PeerId::is_zero() const {
  return std::all_of(bytes_.begin(), bytes_.end(), [](std::uint8_t b) { return b == 0; });
}

std::string PeerId::to_string() const { return to_hex(span()); }

std::string PeerId::short_string() const { return to_string().substr(0, 8); }

}  // namespace dedloc::crypto
