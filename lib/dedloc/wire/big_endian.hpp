// Fixed-width integers in network byte order, for the binary frames (auth_frame.hpp, datagram.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "dedloc/core/bytes.hpp"

namespace dedloc::wire {

template <class T>
void put_big_endian(Bytes& out, T value) {
  static_assert(std::is_unsigned_v<T>);
  for (int shift = 8 * static_cast<int>(sizeof(T)) - 8; shift >= 0; shift -= 8) {
    out.push_back(static_cast<std::uint8_t>(value >> shift));
  }
}

}  // namespace dedloc::wire
