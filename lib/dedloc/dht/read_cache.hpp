// What a node keeps between its latest-value reads of a key (Node::get, GetMode::kLatest), so that each
// replica sends only what was stored since this node last read it (storage.hpp's cursors), sans-IO.
//
// Why: a run's progress records live under one key, one subkey per peer, and every peer reads them all
// from every replica each half second while a round is in progress. Read whole, that is the number of
// peers squared times a record's size through each replica's upload, and a replica on a home link spent a
// tenth of its upload on it in the lab (bench/lab/README.md), while nothing had changed. Read as changes,
// an unchanged record costs a replica a few dozen bytes per reader.
//
// Per key: the entries merged from earlier answers (each passed the validator when it came; an entry is
// dropped here when it expires, as a replica drops it) and, per replica, the cursor its last complete
// answer gave. The cached entries are what a cursor stands for: a reader that sends a replica its cursor
// must merge the cached entries with the answer. Concurrent reads of one key each begin from the cache and
// end into it; end() merges rather than replaces (entries by expiration, cursors by sequence), which stays
// sound: every cursor kept was earned by an answer whose entries are kept too. A replica that fails, or
// sends no cursor (its answer was cut at the reply's size limit), keeps the cursor it had: the cached
// entries still hold everything up to it.
//
// Bounded: `max_keys` keys (the least recently read goes first), `max_cursors` per key (past that, the
// lowest are forgotten: those replicas send everything once more). Not thread-safe: the node guards it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/dht/storage.hpp"
#include "dedloc/wire/dht_messages.hpp"

namespace dedloc::dht {

class ReadCache {
 public:
  struct View {
    std::vector<wire::RecordEntry> entries;              // live at `now`, no signatures
    std::map<crypto::PeerId, StorageCursor> cursors;     // per replica, where its last answer ended
  };

  explicit ReadCache(size_t max_keys = 64, size_t max_cursors = 32) : max_keys_(max_keys), max_cursors_(max_cursors) {}

  // What we hold for `key` at `now` (unix seconds): nothing for a key not read before.
  View begin(const crypto::PeerId& key, double now);
  // A read of `key` ended with these entries (validated) and these replicas' cursors.
  void end(const crypto::PeerId& key, const std::vector<wire::RecordEntry>& entries,
           const std::map<crypto::PeerId, StorageCursor>& cursors, double now);

  size_t keys() const { return keys_.size(); }

 private:
  struct Key {
    std::map<std::optional<Bytes>, wire::RecordEntry> entries;
    std::map<crypto::PeerId, StorageCursor> cursors;
    std::uint64_t last_used = 0;
  };
  void drop_expired(Key& cached, double now);

  size_t max_keys_;
  size_t max_cursors_;
  std::uint64_t uses_ = 0;  // a logical clock for "least recently read"
  std::map<crypto::PeerId, Key> keys_;
};

}  // namespace dedloc::dht
