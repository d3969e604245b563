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
#include <vector>

#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::dht {

// `known`: the ids of our contacts nearest to `key` (at least `replicas` of them when we know that many;
// `newcomer` and `self` may be among them and are ignored there).
bool hands_over(const crypto::PeerId& key, const crypto::PeerId& self, const crypto::PeerId& newcomer,
                const std::vector<crypto::PeerId>& known, size_t replicas);

}  // namespace dedloc::dht
