// The AvgBegin a leader could send, for unit tests that build an avg::Group without matchmaking.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "dedloc/avg/group.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/wire/avg_messages.hpp"

namespace dedloc::test {

// One member per (role, count of elements it reduces), each with a fresh id and, unless a client (nobody
// dials it), an endpoint; the group id is fixed.
inline wire::AvgBegin begin_of(const std::vector<std::pair<avg::AvgRole, std::uint64_t>>& members,
                               std::uint64_t length, std::uint64_t part_elements) {
  wire::AvgBegin begin;
  begin.group_id = Bytes(wire::kGroupIdBytes, 7);
  begin.part_elements = part_elements;
  begin.length = length;
  for (const auto& [role, count] : members) {
    begin.ids.push_back(crypto::Identity::generate().peer_id());
    begin.endpoints.push_back(role == avg::AvgRole::kClient ? "" : "tcp://127.0.0.1:1");
    begin.roles.push_back(role);
    begin.counts.push_back(count);
  }
  return begin;
}

}  // namespace dedloc::test
