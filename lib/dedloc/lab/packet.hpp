// What the lab's emulator reads of a packet: the IPv4 header's addresses and protocol, and the ports of
// TCP and UDP (for the NAT filter). Everything else passes through untouched. Bounds-checked: a short or
// malformed packet is not an IPv4 packet.
#pragma once

#include <cstdint>
#include <optional>

#include "dedloc/core/bytes.hpp"

namespace dedloc::lab {

constexpr std::uint8_t kIcmp = 1, kTcp = 6, kUdp = 17;

struct PacketInfo {
  std::uint32_t source = 0, destination = 0;  // host byte order
  std::uint8_t protocol = 0;
  std::uint16_t source_port = 0, destination_port = 0;  // TCP and UDP (first fragment) only
  std::uint8_t icmp_type = 0;                            // ICMP only
};

std::optional<PacketInfo> parse_ipv4(ByteSpan packet);

}  // namespace dedloc::lab
