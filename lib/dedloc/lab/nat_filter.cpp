#include "dedloc/lab/nat_filter.hpp"

#include <functional>

namespace dedloc::lab {

namespace {
constexpr std::uint8_t kEchoRequest = 8;
}

size_t NatFilter::KeyHash::operator()(const Key& k) const {
  const std::uint64_t a = (std::uint64_t{k.inside} << 32) | k.outside;
  const std::uint64_t b = (std::uint64_t{k.inside_port} << 24) | (std::uint64_t{k.outside_port} << 8) | k.protocol;
  return std::hash<std::uint64_t>{}(a * 0x9e3779b97f4a7c15ull ^ b);
}

void NatFilter::note_outbound(const PacketInfo& p, TimePoint now) {
  if (p.protocol != kTcp && p.protocol != kUdp) return;  // ICMP: see admits_inbound
  flows_[Key{p.source, p.destination, p.source_port, p.destination_port, p.protocol}] = now;
  prune(now);
}

bool NatFilter::admits_inbound(const PacketInfo& p, TimePoint now) {
  if (p.protocol == kIcmp) return p.icmp_type != kEchoRequest;  // echo replies and errors come back; pings in do not
  if (p.protocol != kTcp && p.protocol != kUdp) return false;
  auto it = flows_.find(Key{p.destination, p.source, p.destination_port, p.source_port, p.protocol});
  if (it == flows_.end() || now - it->second > kIdleTimeout) return false;
  it->second = now;
  return true;
}

void NatFilter::prune(TimePoint now) {
  if (now - last_prune_ < std::chrono::seconds(30)) return;
  last_prune_ = now;
  std::erase_if(flows_, [&](const auto& flow) { return now - flow.second > kIdleTimeout; });
}

}  // namespace dedloc::lab
