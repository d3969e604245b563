// A home router's effect on the hosts behind it, as the lab emulates it: a host behind NAT can open
// connections out (TCP, UDP, ping) and gets their answers, but nothing from outside can reach it first.
// The emulator keeps the flows such hosts opened and drops any other packet addressed to them. Addresses
// are not rewritten: what matters to dedloc is who can connect to whom (a peer behind NAT must use client
// mode and relays), and the lab's addresses stay simple to read in logs.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "dedloc/core/clock.hpp"
#include "dedloc/lab/packet.hpp"

namespace dedloc::lab {

class NatFilter {
 public:
  // A flow is forgotten this long after its last packet (a router's UDP/TCP idle timeouts, simplified).
  static constexpr Duration kIdleTimeout = std::chrono::minutes(5);

  // A packet leaving a host behind NAT: its flow is now open for answers.
  void note_outbound(const PacketInfo& packet, TimePoint now);
  // Whether a packet addressed to a host behind NAT is the answer to a flow it opened.
  bool admits_inbound(const PacketInfo& packet, TimePoint now);

  size_t flows() const { return flows_.size(); }

 private:
  struct Key {
    std::uint32_t inside = 0, outside = 0;
    std::uint16_t inside_port = 0, outside_port = 0;
    std::uint8_t protocol = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  void prune(TimePoint now);

  std::unordered_map<Key, TimePoint, KeyHash> flows_;  // the last packet of each open flow
  TimePoint last_prune_{};
};

}  // namespace dedloc::lab
