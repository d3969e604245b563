// DHT keys and owned records.
//
// A key is named by a string ("run1_progress"); its 160-bit id is BLAKE2b-160 of the name, so ids are
// spread evenly over the key space whatever the names look like. A key name or subkey that contains an
// owner marker "[owner:<64 hex digits of an ed25519 public key>]" is owned: every value stored there must
// carry that key's signature over (key id, subkey, value, expiration). Nobody else can write it, and since
// the expiration is signed, nobody can extend it either; an old signed value replayed loses to the newer
// one under the newer-expiration-wins rule.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/wire/dht_messages.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::dht {

using crypto::PeerId;
using wire::RecordEntry;

// The 160-bit id of a key name.
PeerId key_id(std::string_view key_name);

// "[owner:<hex public key>]": put it in a key name or subkey to make the entry owned by `key` (its format is
// part of the record catalogue, wire/records.hpp).
using wire::owner_marker;

// The owner named in `text`: nullopt when there is none; kMalformed when there are several or one is not
// 64 hex digits (such names are refused rather than treated as unowned).
Result<std::optional<crypto::PublicKey>> find_owner(ByteSpan text);
// The PeerID of the one owner named in `text` (an owned subkey: "[owner:<hex public key>]"); nullopt when
// none is, or the name is malformed.
std::optional<crypto::PeerId> owner_peer_id(ByteSpan text);

// The owner of an entry under `key_name`: named by the subkey, or else by the key name. Both naming
// (different) owners is kMalformed.
Result<std::optional<crypto::PublicKey>> entry_owner(std::string_view key_name, const std::optional<Bytes>& subkey);

// The bytes an owner signs: a domain tag, the key id, the subkey (or its absence), the value and the
// expiration, each length-prefixed so no two records share a payload.
Bytes signing_payload(const PeerId& key, const std::optional<Bytes>& subkey, ByteSpan value, double expiration);

// Signs `entry` in place when `identity` owns it (else leaves the signature empty).
Status sign_entry(const crypto::Identity& identity, std::string_view key_name, RecordEntry& entry);

// OK for an unowned entry; for an owned one, OK only with the owner's valid signature (kUnauthorized
// otherwise, saying what is wrong).
Status check_owner_signature(std::string_view key_name, const RecordEntry& entry);

}  // namespace dedloc::dht
