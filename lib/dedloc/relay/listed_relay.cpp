#include "dedloc/relay/listed_relay.hpp"

#include <algorithm>
#include <thread>

#include "dedloc/net/transport_security.hpp"
#include "dedloc/relay/relay_directory.hpp"

namespace dedloc::relay {

ListedRelay::ListedRelay(zmq::context_t& context, const crypto::Identity& identity, ListedRelayOptions options)
    : context_(context), identity_(identity), options_(std::move(options)), server_(context, identity, options_.relay) {}

ListedRelay::~ListedRelay() = default;

Status ListedRelay::start() {
  DEDLOC_RETURN_IF_ERROR(server_.start());
  std::string toward;  // our address as the first initial peer would see it
  if (!options_.initial_peers.empty()) {
    if (auto host = net::parse_tcp_endpoint(options_.initial_peers.front().endpoint)) toward = host->host;
  }
  address_ = net::PeerAddress{
      options_.announce.empty()
          ? net::dialable_endpoint(server_.endpoint(), toward)
          : net::advertised_endpoint(options_.announce, net::TransportKeys::process_default().get()),
      identity_.peer_id()};
  if (!options_.initial_peers.empty()) {
    auto joined = dht::join_as_client(context_, identity_, options_.initial_peers,
                                      Deadline::after(options_.join_timeout), add_relay_schema);
    if (!joined) return joined.status();
    node_ = std::move(*joined);
  }
  return {};
}

RelayStats ListedRelay::run(const std::function<bool()>& should_stop) {
  Logger& log = *options_.relay.log;
  log.info("relay") << "serving on " << server_.endpoint() << " as " << address_.to_string()
                    << (node_ ? ", listed in the DHT" : " (not listed: no --initial-peers)");
  auto next_listing = std::chrono::steady_clock::now();
  while (!should_stop()) {
    if (node_ && std::chrono::steady_clock::now() >= next_listing) {
      auto stats = server_.stats();
      auto listed = advertise_relay(*node_, {address_, stats.attached, options_.relay.limits.max_peers},
                                    options_.listing_ttl, Deadline::after(std::chrono::seconds(5)));
      if (!listed.is_ok()) log.warn("relay") << "listing in the DHT: " << listed.to_string();
      next_listing = std::chrono::steady_clock::now() + options_.listing_ttl / 3;
    }
    // Until the next refresh (or at once, unlisted: the server works on its own threads).
    sleep_unless(node_ ? next_listing - std::chrono::steady_clock::now() : std::chrono::seconds(1), should_stop);
  }
  auto stats = server_.stats();
  log.info("relay") << "stopping: " << stats.attaches << " attach(es), " << stats.forwarded << " request(s) and "
                    << stats.bytes << " bytes relayed, " << stats.refused << " refused";
  server_.stop();
  return stats;
}

}  // namespace dedloc::relay
