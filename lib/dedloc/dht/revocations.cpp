#include "dedloc/dht/revocations.hpp"

#include "dedloc/dht/node.hpp"
#include "dedloc/dht/record.hpp"

namespace dedloc::dht {

Result<std::optional<std::set<crypto::PublicKey>>> read_revocations(Node& node, const crypto::PublicKey& authority,
                                                                     Deadline deadline) {
  auto record = node.get(revocation_key(authority), GetMode::kLatest, deadline);
  if (!record) return record.status();
  if (!record->has_value()) return std::optional<std::set<crypto::PublicKey>>();
  for (const auto& entry : (*record)->entries) {
    if (entry.subkey) continue;
    auto revoked = decode_revocations(entry.value);
    if (!revoked) return revoked.status();
    return std::optional(std::move(*revoked));
  }
  return error(Code::kMalformed, "revocation list: a dictionary where a plain value belongs");
}

Status publish_revocations(Node& node, const std::set<crypto::PublicKey>& revoked, double ttl_seconds,
                           Deadline deadline) {
  if (revoked.size() > kMaxRevokedKeys) {
    return error(Code::kTooLarge, "a revocation list holds at most " + std::to_string(kMaxRevokedKeys) + " keys");
  }
  auto stored = node.store(revocation_key(node.identity().public_key()), std::nullopt, encode_revocations(revoked),
                           SystemClock::instance().unix_seconds() + ttl_seconds, deadline);
  if (!stored) return stored.status();
  if (stored->stored == 0) return error(Code::kUnavailable, "no DHT node took the revocation list");
  return Status::ok();
}

}  // namespace dedloc::dht
