// A DHT node's local storage (sans-IO: the current time is passed in).
//
// Every value carries an absolute expiration time (unix seconds). A store is accepted only if it expires
// later than what is held, so replicas converge on the newest write whatever order stores arrive in. A key
// holds either one plain value or a dictionary: many subkeys, each with its own value and expiration (each
// peer's progress record lives under its own subkey of "{run_id}_progress"). Expired entries are invisible
// and purged; the number of entries is bounded.
#pragma once

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
  explicit Storage(StorageLimits limits = {}) : limits_(limits) {}

  // Stores `value` under `key` (and `subkey`, when given) if it expires after `now` and after what is held
  // there. Returns true if stored; kRefused if older or already expired; kTooLarge over a limit; a plain store
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

 private:
  StorageLimits limits_;
  std::map<crypto::PeerId, Record> records_;
};

}  // namespace dedloc::dht
