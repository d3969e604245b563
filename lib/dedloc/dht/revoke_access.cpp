#include "dedloc/dht/revoke_access.hpp"

#include <set>

#include "dedloc/crypto/access_token.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/dht/revocations.hpp"
#include "dedloc/net/access_control.hpp"

namespace dedloc::dht {

Result<RevocationUpdate> revoke_access(zmq::context_t& context, const crypto::Identity& authority,
                                       const crypto::PublicKey& peer,
                                       const std::vector<net::PeerAddress>& initial_peers, Deadline deadline) {
  if (initial_peers.empty()) {
    return error(Code::kInvalidArgument, "--initial-peers ADDR is required: a node of the run");
  }
  const double now = SystemClock::instance().unix_seconds();
  auto own_token = crypto::AccessToken::issue(authority, authority.public_key(), "authority",
                                              static_cast<std::uint64_t>(now + 3600));
  if (!own_token) return own_token.status();
  auto access = net::AccessControl::create(authority, {.authority = authority.public_key(), .token = *own_token});
  if (!access) return access.status();
  NodeOptions options;
  options.socket.access = *access;
  options.revocation_refresh = Duration::zero();
  auto node = join_as_client(context, authority, initial_peers, deadline, {}, options);
  if (!node) return node.status();
  auto listed = read_revocations(**node, authority.public_key(), deadline);
  if (!listed) return listed.status().with_context("reading the revocation list");
  std::set<crypto::PublicKey> revoked = listed->value_or(std::set<crypto::PublicKey>{});
  revoked.insert(peer);
  if (auto published = publish_revocations(**node, revoked, kRevocationListTtlSeconds, deadline); !published.is_ok()) {
    return published.with_context("publishing the revocation list");
  }
  return RevocationUpdate{revoked.size(), now + kRevocationListTtlSeconds};
}

}  // namespace dedloc::dht
