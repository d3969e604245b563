// The Kademlia routing table (sans-IO: no sockets, time passed in).
//
// Ids are 160-bit PeerIDs compared by XOR distance. The table is a list of k-buckets, each covering the
// ids that share a bit prefix. A full bucket splits only if it covers our own id (the usual rule, which
// keeps the table O(k log n) while knowing our own neighbourhood in detail); otherwise a newcomer waits in
// the bucket's replacement cache and the least recently seen contact is returned to be pinged: if it
// fails to answer, mark_dead() evicts it and the newest cached contact takes its place.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::dht {

using crypto::PeerId;

struct Contact {
  PeerId id;
  std::string endpoint;  // "tcp://host:port"
  double last_seen = 0;  // unix seconds
};

// a XOR b, as a 160-bit number in big-endian bytes (compare with <).
PeerId xor_distance(const PeerId& a, const PeerId& b);
// True when `a` is closer to `target` than `b` (ties broken by id, so orders are total and stable).
bool closer_to(const PeerId& target, const PeerId& a, const PeerId& b);

class RoutingTable {
 public:
  explicit RoutingTable(PeerId self, size_t bucket_size = 20, size_t replacement_cache_size = 20);

  // Records that `contact` answered or wrote to us. Returns the contact to ping when its bucket is full
  // and cannot split (the newcomer is cached as a replacement meanwhile); nullopt otherwise.
  std::optional<Contact> update(const Contact& contact);
  // The contact stopped answering: remove it, promote the newest cached replacement of its bucket.
  void mark_dead(const PeerId& id);

  std::optional<Contact> find(const PeerId& id) const;
  // Up to `count` known contacts, nearest to `target` first (never ourselves).
  std::vector<Contact> nearest(const PeerId& target, size_t count) const;
  // How many known contacts other than `ignored` are nearer to `target` than `id`, counted up to `limit`
  // (cheap where nearest() is not: no copies, and it stops at the limit).
  size_t count_nearer(const PeerId& target, const PeerId& id, size_t limit, const PeerId& ignored) const;

  size_t size() const;
  size_t bucket_count() const { return buckets_.size(); }
  const PeerId& self() const { return self_; }

 private:
  struct Bucket {
    PeerId prefix;  // the first `depth` bits are the bucket's prefix; the rest are zero
    size_t depth = 0;
    std::vector<Contact> contacts;      // least recently seen first
    std::vector<Contact> replacements;  // newest last
    bool covers(const PeerId& id) const;
  };
  Bucket& bucket_for(const PeerId& id);
  const Bucket& bucket_for(const PeerId& id) const;
  void split(size_t index);

  PeerId self_;
  size_t bucket_size_;
  size_t replacement_cache_size_;
  std::vector<Bucket> buckets_;
};

}  // namespace dedloc::dht
