#include "dedloc/dht/revocations.hpp"

#include "dedloc/dht/node.hpp"
#include "dedloc/dht/record.hpp"

namespace dedloc::dht {

std::string revocation_key(const crypto::PublicKey& authority) { return "dedloc_revocations" + owner_marker(authority); }

Bytes encode_revocations(const std::set<crypto::PublicKey>& revoked) {
  Bytes out;
  out.reserve(revoked.size() * crypto::kPublicKeySize);
  for (const auto& key : revoked) out.insert(out.end(), key.begin(), key.end());
  return out;
}

Result<std::set<crypto::PublicKey>> decode_revocations(ByteSpan value) {
  if (value.size() % crypto::kPublicKeySize != 0 || value.size() / crypto::kPublicKeySize > kMaxRevokedKeys) {
    return error(Code::kMalformed, "revocation list: " + std::to_string(value.size()) +
                                       " bytes is not a whole list of at most " + std::to_string(kMaxRevokedKeys) +
                                       " public keys");
  }
  std::set<crypto::PublicKey> revoked;
  for (size_t at = 0; at < value.size(); at += crypto::kPublicKeySize) {
    crypto::PublicKey key{};
    std::copy_n(value.begin() + static_cast<std::ptrdiff_t>(at), crypto::kPublicKeySize, key.begin());
    revoked.insert(key);
  }
  return revoked;
}

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
