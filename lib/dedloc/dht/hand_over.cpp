#include "dedloc/dht/hand_over.hpp"

#include "dedloc/dht/routing_table.hpp"

namespace dedloc::dht {

bool hands_over(const crypto::PeerId& key, const crypto::PeerId& self, const crypto::PeerId& newcomer,
                const std::vector<crypto::PeerId>& known, size_t replicas) {
  if (newcomer == self || replicas == 0) return false;
  // Ranks among the other contacts: how many of them are nearer to the key than we are, and than the newcomer.
  size_t nearer_than_self = 0, nearer_than_newcomer = 0;
  for (const auto& id : known) {
    if (id == self || id == newcomer) continue;
    nearer_than_self += closer_to(key, id, self);
    nearer_than_newcomer += closer_to(key, id, newcomer);
  }
  bool self_was_replica = nearer_than_self < replicas;
  bool newcomer_is_replica = nearer_than_newcomer + (closer_to(key, self, newcomer) ? 1 : 0) < replicas;
  return self_was_replica && newcomer_is_replica;
}

}  // namespace dedloc::dht
