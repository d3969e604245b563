#include "dedloc/lab/packet.hpp"

namespace dedloc::lab {

namespace {
std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }
}  // namespace

std::optional<PacketInfo> parse_ipv4(ByteSpan packet) {
  if (packet.size() < 20 || (packet[0] >> 4) != 4) return std::nullopt;
  const size_t header = size_t{packet[0] & 0x0fu} * 4;
  if (header < 20 || header > packet.size()) return std::nullopt;
  PacketInfo info;
  info.protocol = packet[9];
  info.source = be32(&packet[12]);
  info.destination = be32(&packet[16]);
  const bool first_fragment = (be16(&packet[6]) & 0x1fffu) == 0;
  const std::uint8_t* payload = packet.data() + header;
  const size_t left = packet.size() - header;
  if (first_fragment && (info.protocol == kTcp || info.protocol == kUdp) && left >= 4) {
    info.source_port = be16(payload);
    info.destination_port = be16(payload + 2);
  } else if (info.protocol == kIcmp && left >= 1) {
    info.icmp_type = payload[0];
  }
  return info;
}

}  // namespace dedloc::lab
