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
#include "dedloc/wire/records.hpp"

namespace dedloc::dht {

class Node;

// The key, the value's encoding and its size limit are in the record catalogue (wire/records.hpp).
using wire::decode_revocations;
using wire::encode_revocations;
using wire::kMaxRevokedKeys;
using wire::revocation_key;

// The authority's list as the DHT holds it now; nullopt when no node answered with one (none published, or
// none reachable: a reader then keeps the list it had).
Result<std::optional<std::set<crypto::PublicKey>>> read_revocations(Node& node, const crypto::PublicKey& authority,
                                                                     Deadline deadline);
// Publishes `revoked` as the authority's list, valid for `ttl_seconds`. `node` must run as the authority
// (its identity signs the list).
Status publish_revocations(Node& node, const std::set<crypto::PublicKey>& revoked, double ttl_seconds,
                           Deadline deadline);

}  // namespace dedloc::dht
