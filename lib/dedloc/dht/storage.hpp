// A DHT node's local storage (sans-IO: the current time is passed in).
//
// Every value carries an absolute expiration time (unix seconds). A store is accepted only if it expires
// later than what is held, so replicas converge on the newest write whatever order stores arrive in. A key
// holds either one plain value or a dictionary: many subkeys, each with its own value and expiration (each
// peer's progress record lives under its own subkey of "{run_id}_progress"). Expired entries are invisible
// and purged; the number of entries is bounded.
//
// Every accepted store is stamped with the storage's next sequence number, so a reader that comes back asks
// for what changed since its last read here (a cursor: this storage's instance, drawn at random when it is
// made, and the sequence number it had reached), and is sent only that (Node::get, dht/read_cache.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::dht {

struct StoredValue {
  Bytes value;
  double expiration = 0;  // unix seconds
  Bytes signature;        // the owner's, for owned entries (kept so the record can be re-stored elsewhere)
  std::uint64_t seq = 0;  // set by Storage::store: the sequence number of the store that put it here
};

// Where a reader's last read of one storage ended: entries stored later have a higher seq. A storage
// made anew (a restarted node) has another instance, and a cursor from before means nothing there.
struct StorageCursor {
  std::uint64_t instance = 0;  // 0: none (the reader has not read this storage)
  std::uint64_t seq = 0;
  bool operator==(const StorageCursor&) const = default;
};

// What a key holds now: a plain value, or the live subkeys of a dictionary.
struct Record {
  std::string name;  // the key's name when a store told it (needed to re-store the record elsewhere)
  std::optional<StoredValue> value;
  std::map<Bytes, StoredValue> subkeys;
  // The latest expiration in the record (how long the key stays alive).
  double expiration() const;
};

struct StorageLimits {
  size_t max_keys = 100000;
  size_t max_subkeys_per_key = 10000;
  size_t max_value_bytes = 64u << 10;
};

class Storage {
 public:
  explicit Storage(StorageLimits limits = {});

  // Stores `value` under `key` (and `subkey`, when given) if it expires after `now` and after what is held
  // there. Returns true if stored, false if this very entry (value, signature, expiration) is held already;
  // kRefused if older or already expired; kTooLarge over a limit; a plain store
  // over a dictionary (or the reverse) replaces it only if it expires later than the whole record.
  Result<bool> store(const crypto::PeerId& key, const std::optional<Bytes>& subkey, StoredValue value, double now,
                     std::string_view name = {});
  Result<bool> store(const crypto::PeerId& key, const std::optional<Bytes>& subkey, Bytes value, double expiration,
                     double now) {
    return store(key, subkey, StoredValue{std::move(value), expiration, {}}, now);
  }
  // The live record under `key`, or nullopt.
  std::optional<Record> get(const crypto::PeerId& key, double now) const;
  // The keys holding something live at `now` (what a node re-stores to the current replicas).
  std::vector<crypto::PeerId> live_keys(double now) const;
  // Drops everything expired by `now`.
  void purge(double now);
  size_t key_count() const { return records_.size(); }
  // Where a read now ends: entries stored from here on have seq > cursor().seq.
  StorageCursor cursor() const { return {instance_, seq_}; }

 private:
  StorageLimits limits_;
  std::uint64_t instance_;
  std::uint64_t seq_ = 0;
  std::map<crypto::PeerId, Record> records_;
};

}  // namespace dedloc::dht
