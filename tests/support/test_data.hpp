// Deterministic test data.
#pragma once

#include <cstdint>
#include <span>

namespace dedloc::test {

// The bytes of an endless deterministic stream at `offset`: any range can be produced (or checked) on its
// own, so neither side of a large transfer needs to hold the whole stream.
inline void fill_pattern(std::uint64_t offset, std::span<std::uint8_t> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    std::uint64_t x = (offset + i) * 0x9E3779B97F4A7C15ull;
    out[i] = static_cast<std::uint8_t>(x >> 56);
  }
}

}  // namespace dedloc::test
