// Trainers an all-reduce found gone (avg::AllReduceResult::gone: they stopped answering pings), kept out
// of the count of trainers the next searches expect. A trainer that died still has a progress record until
// it expires (record_ttl), and without this every search until then would wait out the quorum's grace for
// it (avg/group_formation.hpp). Progress records name their owner by a DHT key marker, not by the peer id
// the all-reduce knows, so the two are matched by count: a gone trainer is subtracted from the records
// read while there are at least as many as when it was found gone, and forgotten once fewer are (its
// record expired), once record_ttl passed, or at once when it turns up in a group (it was not gone).
// Sans-IO: the trainer (train/trainer.cpp) passes the time; tests/unit/collab/averaging_timeouts_test.cpp.
#pragma once

#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::collab {

class KnownGone {
 public:
  explicit KnownGone(Duration record_ttl) : record_ttl_(record_ttl) {}

  // Trainers found gone at `now`, while `others` other trainers' records were read.
  void add(const std::vector<crypto::PeerId>& gone, size_t others, TimePoint now);
  // A group formed with these members: none of them is gone.
  void seen(const std::vector<crypto::PeerId>& members);
  // How many trainers a search expects, us included: `others` (records read now) + 1, less the trainers
  // still known gone.
  size_t expected(size_t others, TimePoint now);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    crypto::PeerId id;
    size_t others_then = 0;
    TimePoint until{};
  };
  Duration record_ttl_;
  std::vector<Entry> entries_;
};

}  // namespace dedloc::collab
