// Revoking a peer of a private run, as the run's authority does it (`dedloc-dht token revoke`): join the
// run's DHT as the authority, read its revocation list (revocations.hpp), add the key, publish the whole
// list again.
#pragma once

#include <cstddef>
#include <vector>

#include <zmq.hpp>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/peer_address.hpp"

namespace dedloc::dht {

// The DHT keeps a value 30 days at most; a day's margin for clocks.
inline constexpr double kRevocationListTtlSeconds = 29 * 86400.0;

struct RevocationUpdate {
  size_t listed = 0;          // keys in the list now, the new one included
  double list_expires = 0;    // unix seconds: publish again before then to keep the list
};

// Adds `peer` to `authority`'s revocation list. The authority takes part as itself, with a token it signs
// for its own key for this one call (valid an hour). `initial_peers`: nodes of the run (none:
// kInvalidArgument). Errors say which step failed (joining, reading, publishing).
Result<RevocationUpdate> revoke_access(zmq::context_t& context, const crypto::Identity& authority,
                                       const crypto::PublicKey& peer,
                                       const std::vector<net::PeerAddress>& initial_peers, Deadline deadline);

}  // namespace dedloc::dht
