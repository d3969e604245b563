// Byte strings and their printable forms.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dedloc {

using Bytes = std::vector<std::uint8_t>;
using ByteSpan = std::span<const std::uint8_t>;

inline ByteSpan as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// Lowercase hex, two characters a byte.
std::string to_hex(ByteSpan bytes);
// Parses lowercase or uppercase hex; nullopt on odd length or a non-hex character.
std::optional<Bytes> from_hex(std::string_view hex);

}  // namespace dedloc
