// Where peers find relays without configuration: every relay lists itself in the DHT under
// "dedloc_relays", one owner-signed subkey per relay ("[owner:<its public key>]", so nobody can list a
// relay in another's name or remove one), the value a msgpack map {"addr": "tcp://HOST:PORT/k/RELAYKEY",
// "peers": uint attached now, "max": uint its limit} (the record catalogue, wire/records.hpp, holds the
// key, the map and its schema). A relay refreshes its entry every ttl/3.
#pragma once

#include <cstdint>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::relay {

using wire::kRelaysKey;

struct RelayListing {
  net::PeerAddress address;    // always with the relay's PeerID
  std::uint64_t peers = 0;
  std::uint64_t max_peers = 0;
  // When the listing lapses (unix seconds; 0 when not read from the DHT). A relay refreshes it every ttl/3
  // with the same ttl, so a later expiration is a more recent refresh: a relay that died stops moving it.
  double expiration = 0;
};

Status advertise_relay(dht::Node& node, const RelayListing& relay, Duration ttl, Deadline deadline);
// The live listings, least loaded first, the most recently refreshed first among equals; entries that do not parse, or whose address does not name the
// entry's owner, are skipped.
Result<std::vector<RelayListing>> list_relays(dht::Node& node, Deadline deadline);
// One entry of the listing as list_relays reads it (the owner subkey and the msgpack value, from anyone):
// kMalformed when it does not parse, is withdrawn (empty), or its address does not name the entry's owner.
Result<RelayListing> parse_relay_listing(const dht::FoundEntry& entry);
// Registers the listing's schema ("_relays") with a node's validator (before node.start()).
void add_relay_schema(dht::RecordValidator& validator);

}  // namespace dedloc::relay
