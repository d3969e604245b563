#include "dedloc/dht/way_back.hpp"

#include <algorithm>

namespace dedloc::dht {

void WayBack::dropped(const Contact& contact) {
  answered(contact.id);
  dropped_.insert(dropped_.begin(), contact);
  if (dropped_.size() > max_dropped_) dropped_.resize(max_dropped_);
}

void WayBack::answered(const PeerId& id) {
  std::erase_if(dropped_, [&](const Contact& c) { return c.id == id; });
}

std::vector<net::PeerAddress> WayBack::take_due(TimePoint now, Duration retry_after) {
  if (last_attempt_ && now - *last_attempt_ < retry_after) return {};
  std::vector<net::PeerAddress> due;
  for (const auto& c : dropped_) due.push_back({c.endpoint, c.id});
  for (const auto& peer : initial_) {
    const bool listed = std::any_of(due.begin(), due.end(), [&](const net::PeerAddress& d) {
      return d.endpoint == peer.endpoint || (peer.peer_id && d.peer_id == peer.peer_id);
    });
    if (!listed) due.push_back(peer);
  }
  if (!due.empty()) last_attempt_ = now;
  return due;
}

}  // namespace dedloc::dht
