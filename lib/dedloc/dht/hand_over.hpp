// Which of our keys a node that just joined should be handed (sans-IO).
//
// A key's records live on the nodes nearest to it when it was stored, and stay there until their holders
// re-store them (NodeOptions::maintenance_interval, minutes). When nodes join, a key's nearest nodes
// change: a reader whose lookup ends at the newcomers would find nothing. Kademlia's remedy, which this
// implements: a node that learns of a newcomer copies to it each key it holds for which the newcomer is now
// among the replicas (the `replicas` nodes nearest the key that we know, ourselves included) and we were
// among them before it came. Every old replica that knows the newcomer does so; the copies after the first
// are no-ops at the newcomer (an identical re-store), which buys robustness against views that differ.
#pragma once

#include <cstddef>

#include "dedloc/dht/routing_table.hpp"

namespace dedloc::dht {

// True when `newcomer` (which may be in `table` already) is now among the `replicas` nodes nearest to `key`
// that the table knows, its owner included, and the owner was among them without the newcomer.
bool hands_over(const RoutingTable& table, const PeerId& key, const PeerId& newcomer, size_t replicas);

}  // namespace dedloc::dht
