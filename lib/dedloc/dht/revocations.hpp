// A private run's revocation list: the public keys whose tokens the run's authority withdrew
// before they expire, published in the DHT so that every peer stops accepting them.
//
// The list is the plain value under "dedloc_revocations" + owner_marker(authority): an owned key, so only
// the authority can write it (every node checks its signature, record.hpp), and nobody can shorten it:
// a store must expire later than what is held. The value is the revoked keys, 32 bytes each, sorted.
// Nodes of a private run read it every NodeOptions::revocation_refresh and hand it to their access control
// (net/access_control.hpp). The DHT keeps a value 30 days at most: `dedloc-dht token revoke` re-publishes
// the whole list each time, and an authority that revokes rarely re-publishes it monthly (cron).
#pragma once

#include <optional>
#include <set>
#include <string>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"

namespace dedloc::dht {

class Node;

// At most this many keys in one list (the DHT's 64 KiB value limit holds 2048).
inline constexpr size_t kMaxRevokedKeys = 2000;

std::string revocation_key(const crypto::PublicKey& authority);
Bytes encode_revocations(const std::set<crypto::PublicKey>& revoked);
// Any bytes: kMalformed unless a whole number of keys, at most kMaxRevokedKeys.
Result<std::set<crypto::PublicKey>> decode_revocations(ByteSpan value);

// The authority's list as the DHT holds it now; nullopt when no node answered with one (none published, or
// none reachable: a reader then keeps the list it had).
Result<std::optional<std::set<crypto::PublicKey>>> read_revocations(Node& node, const crypto::PublicKey& authority,
                                                                     Deadline deadline);
// Publishes `revoked` as the authority's list, valid for `ttl_seconds`. `node` must run as the authority
// (its identity signs the list).
Status publish_revocations(Node& node, const std::set<crypto::PublicKey>& revoked, double ttl_seconds,
                           Deadline deadline);

}  // namespace dedloc::dht
