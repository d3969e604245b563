// A relay as `dedloc-relay serve` runs it: the relay server, and, when given DHT nodes, its listing in
// the DHT (relay_directory.hpp), refreshed while it serves so that client-mode peers find it without
// configuration.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "dedloc/dht/node.hpp"
#include "dedloc/relay/relay_server.hpp"

namespace dedloc::relay {

struct ListedRelayOptions {
  RelayOptions relay;                            // listen, limits; relay.log is the listing's log too
  std::string announce;                          // the address peers dial, when it differs from the bound one
  std::vector<net::PeerAddress> initial_peers;   // DHT nodes to list through (none: not listed)
  Duration listing_ttl = std::chrono::seconds(60);  // of the listing; refreshed every third of it
  Duration join_timeout = std::chrono::seconds(10);
};

// Not thread-safe: start and run belong to one thread. The context and identity must outlive it.
class ListedRelay {
 public:
  ListedRelay(zmq::context_t& context, const crypto::Identity& identity, ListedRelayOptions options);
  ~ListedRelay();

  // Binds the relay and, with initial peers, joins the DHT through a client-mode node (it serves no
  // records). kUnavailable when the address cannot be bound or no initial peer answers.
  Status start();
  // Where peers dial us: announce, or the bound endpoint with a wildcard host replaced by our host as the
  // first initial peer sees it; always with our PeerID. Valid after start().
  const net::PeerAddress& address() const { return address_; }
  bool listed() const { return node_ != nullptr; }

  // Serves until `should_stop` says so (asked every 50 ms), listing itself again every listing_ttl/3; a
  // listing that fails is logged and tried at the next refresh. Stops the server and returns its counters.
  RelayStats run(const std::function<bool()>& should_stop);

 private:
  zmq::context_t& context_;
  const crypto::Identity& identity_;
  ListedRelayOptions options_;
  RelayServer server_;
  std::unique_ptr<dht::Node> node_;
  net::PeerAddress address_;
};

}  // namespace dedloc::relay
