// Where a node looks for the swarm once its routing table has emptied, sans-IO (Node::find_way_back does
// the pinging; tests/unit/dht/way_back_test.cpp drives the rules).
//
// Why: a contact that misses two deadlines in a row is dropped (node.cpp, note_dead). When our own link
// goes down for a few seconds (a Wi-Fi drop, a laptop lid, a router restart), every contact misses its
// deadlines and the table empties; from then on every lookup failed at once with nothing to ask, for
// good, and the peer trained alone (bench/lab/README.md, "A volunteer's link down for a few seconds"). The
// contacts we dropped are the best bet once the link is back, the initial peers the next: both are kept here.
//
//   dropped    the contacts dropped last, newest first, at most `max_dropped` (one per id)
//   initial    the peers the node joined through, always kept
//   attempts   at most one per `retry_after` (concurrent lookups that find the table empty do not each
//              ping everyone; those that come meanwhile fail at once, as before)
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/dht/routing_table.hpp"
#include "dedloc/net/peer_address.hpp"

namespace dedloc::dht {

class WayBack {
 public:
  explicit WayBack(size_t max_dropped = 16) : max_dropped_(max_dropped) {}

  void set_initial(std::vector<net::PeerAddress> peers) { initial_ = std::move(peers); }
  // `contact` was dropped from the routing table for missing its deadlines.
  void dropped(const Contact& contact);
  // `id` answered again (it is back in the table): no longer a fallback.
  void answered(const PeerId& id);

  // The addresses to ping now (dropped contacts first, then initial peers not among them), and the attempt
  // counted; empty when the last attempt was less than `retry_after` ago, or nothing is known.
  std::vector<net::PeerAddress> take_due(TimePoint now, Duration retry_after);

 private:
  size_t max_dropped_;
  std::vector<Contact> dropped_;  // newest first
  std::vector<net::PeerAddress> initial_;
  std::optional<TimePoint> last_attempt_;
};

}  // namespace dedloc::dht
