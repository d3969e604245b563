// Keeps a client-mode peer reachable: attached to one relay at a time, chosen from the relays
// given (--relay) or else those listed in the DHT (relay_directory.hpp), and attached to another when its
// relay dies (net::RelayLink notices within its dead_after) or refuses it. Its own thread checks the link
// every `check_interval`; the address peers should use changes when it moves, and `on_moved` says so (the
// trainer re-advertises itself there).
//
// The relays it was attached to stay candidates (the last `kRememberedRelays`): when our own link went
// down, the relay looks dead and so does the DHT that lists the others, and once the link is back the
// relay we lost is the one most likely to take us again. While no relay takes us, attempts back off from
// `check_interval` to `longest_retry`, and only the first failure after a loss is a warning.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dedloc/dht/node.hpp"
#include "dedloc/net/relay_link.hpp"

namespace dedloc::relay {

struct RelayKeeperOptions {
  std::vector<net::PeerAddress> relays;  // tried first, in order; then the DHT's listings
  std::string local_endpoint;            // our Server
  net::RelayLinkOptions link;            // heartbeat, dead_after, ... (relay and local_endpoint are set here)
  Duration check_interval = std::chrono::milliseconds(500);
  Duration longest_retry = std::chrono::seconds(4);
  std::function<void(const std::string& address)> on_moved;  // called on the keeper's thread
  Logger* log = &Logger::global();
};

class RelayKeeper {
 public:
  // `node` (may be null: given relays only) and `identity` must outlive the keeper.
  RelayKeeper(zmq::context_t& context, const crypto::Identity& identity, dht::Node* node, RelayKeeperOptions options);
  ~RelayKeeper();

  // Attaches to the first relay that accepts us, before `deadline`; then keeps it in the background.
  // kUnavailable listing each relay's refusal when none accepts; kNotFound when no relay is known.
  Status start(Deadline deadline);
  std::string address() const;  // relay://…/k/RELAYKEY/p/OURID, empty while between relays
  void stop();

 private:
  Status attach_somewhere(Deadline deadline);
  void keep();
  void remember(const net::PeerAddress& relay);

  static constexpr size_t kRememberedRelays = 4;

  zmq::context_t& context_;
  const crypto::Identity& identity_;
  dht::Node* node_;
  RelayKeeperOptions options_;
  std::unique_ptr<net::RelayLink> link_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string address_;
  std::thread thread_;
  // Relays we were attached to, newest first; read and written by attach_somewhere only (start(), then the
  // keeper's thread).
  std::vector<net::PeerAddress> remembered_;
};

}  // namespace dedloc::relay
