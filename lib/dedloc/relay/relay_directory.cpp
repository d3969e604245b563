#include "dedloc/relay/relay_directory.hpp"

#include <algorithm>

#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::relay {

Status advertise_relay(dht::Node& node, const RelayListing& relay, Duration ttl, Deadline deadline) {
  Bytes value = wire::encode_relay_listing({relay.address.to_string(), relay.peers, relay.max_peers});
  std::string owner = dht::owner_marker(node.public_key());
  double expiration = SystemClock::instance().unix_seconds() + std::chrono::duration<double>(ttl).count();
  return node.store(std::string(kRelaysKey), Bytes(owner.begin(), owner.end()), value, expiration, deadline).status();
}

Result<std::vector<RelayListing>> list_relays(dht::Node& node, Deadline deadline) {
  auto found = node.get(std::string(kRelaysKey), dht::GetMode::kLatest, deadline);
  if (!found) return found.status();
  std::vector<RelayListing> relays;
  if (!found->has_value()) return relays;
  for (const auto& entry : (*found)->entries) {
    if (auto listing = parse_relay_listing(entry)) relays.push_back(std::move(*listing));
  }
  std::stable_sort(relays.begin(), relays.end(), [](const RelayListing& a, const RelayListing& b) {
    if (a.peers != b.peers) return a.peers < b.peers;
    return a.expiration > b.expiration;
  });
  return relays;
}

Result<RelayListing> parse_relay_listing(const dht::FoundEntry& entry) {
  auto bad = [](std::string_view why) { return error(Code::kMalformed, "relay listing: " + std::string(why)); };
  if (!entry.subkey || entry.value.empty()) return bad("withdrawn, or not under an owner subkey");
  auto owner = dht::find_owner(*entry.subkey);
  if (!owner) return owner.status();
  if (!owner->has_value()) return bad("the subkey names no owner");
  auto record = wire::decode_relay_listing(entry.value);
  if (!record) return record.status();
  RelayListing listing;
  listing.peers = record->peers;
  listing.max_peers = record->max_peers;
  auto address = net::PeerAddress::parse(record->address);
  if (!address) return address.status();
  if (!address->peer_id) return bad("the address names no peer id");
  // The address must be the owner's own: a relay cannot send clients to a third party.
  if (*address->peer_id != crypto::PeerId::from_public_key(ByteSpan((*owner)->data(), (*owner)->size()))) {
    return bad("the address is not the owner's");
  }
  listing.address = std::move(*address);
  listing.expiration = entry.expiration;
  return listing;
}

void add_relay_schema(dht::RecordValidator& validator) { dht::add_record_schema(validator, wire::relay_schema()); }

}  // namespace dedloc::relay
