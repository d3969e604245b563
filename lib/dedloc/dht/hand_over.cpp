#include "dedloc/dht/hand_over.hpp"

namespace dedloc::dht {

bool hands_over(const RoutingTable& table, const PeerId& key, const PeerId& newcomer, size_t replicas) {
  const PeerId& self = table.self();
  if (newcomer == self || replicas == 0) return false;
  // The newcomer first: for most keys it is far, and the count stops as soon as `replicas` are nearer.
  size_t nearer_than_newcomer = table.count_nearer(key, newcomer, replicas, newcomer);
  if (closer_to(key, self, newcomer)) ++nearer_than_newcomer;
  if (nearer_than_newcomer >= replicas) return false;
  return table.count_nearer(key, self, replicas, newcomer) < replicas;  // we were a replica before it came
}

}  // namespace dedloc::dht
