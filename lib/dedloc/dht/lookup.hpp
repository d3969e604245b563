// One iterative Kademlia lookup, sans-IO: it decides whom to ask next; the caller does the asking.
//
// The lookup keeps the candidates it has heard of in XOR order from the target. It asks the nearest ones it
// has not asked, at most `alpha` at a time; every answer may bring nearer candidates; a candidate that fails
// (its RPC deadline passed, or it answered garbage) is dropped. It is done when the `k` nearest live
// candidates have all answered, or when nobody is left to ask. Time never appears here: each RPC's deadline
// is the transport's business, and a failure is just another input.
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "dedloc/dht/routing_table.hpp"

namespace dedloc::dht {

struct LookupOptions {
  size_t k = 20;      // how many nearest nodes the lookup must hear from before it is done
  size_t alpha = 4;   // requests in flight at once
  size_t max_candidates = 256;  // bound on what hostile answers can make us remember
};

class Lookup {
 public:
  // `self` is never asked or returned (a node does not query itself).
  Lookup(PeerId target, PeerId self, const std::vector<Contact>& seeds, LookupOptions options = {});

  // The contacts to ask now (marked in flight); empty when `alpha` are already in flight or none is left.
  std::vector<Contact> next_queries();
  // `from` answered with these contacts (nearest to the target, in any order).
  void on_answer(const PeerId& from, const std::vector<Contact>& contacts);
  // `from` failed to answer in time, or answered something unusable.
  void on_failure(const PeerId& from);
  // Stop early (e.g. a value was found and the first one is enough).
  void finish() { finished_ = true; }

  bool done() const;
  size_t in_flight() const { return in_flight_; }
  // Up to `count` contacts that answered, nearest first.
  std::vector<Contact> nearest_answered(size_t count) const;
  const PeerId& target() const { return target_; }

 private:
  enum class State { kFresh, kInFlight, kAnswered, kFailed };
  struct Candidate {
    Contact contact;
    State state = State::kFresh;
  };
  void add(const Contact& contact);

  PeerId target_;
  PeerId self_;
  LookupOptions options_;
  std::map<PeerId, Candidate> candidates_;  // keyed by XOR distance to the target: nearest first
  size_t in_flight_ = 0;
  bool finished_ = false;
};

}  // namespace dedloc::dht
