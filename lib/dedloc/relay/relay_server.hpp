// The relay (`dedloc-relay serve`): a public peer that keeps a circuit for each peer behind NAT
// and forwards the requests addressed to it as "relay://HOST:PORT/k/RELAYKEY/p/PEERID" (wire/relay_frames.hpp).
//
// One ROUTER socket and one loop thread. Peers attach with a signed proof of their PeerID; a second attach
// of the same PeerID (the peer reconnected) takes the circuit over. Per attached peer the relay bounds:
//   circuits   distinct requesters with a request in the last `idle` (kRefused beyond)
//   rate       bytes per second through its circuit, both ways (a token bucket; kRefused when empty)
//   total      bytes through its circuit over its whole attachment (kRefused beyond)
//   idle       a circuit with no heartbeat or traffic for this long is closed
// and `max_peers` attachments in all. A refusal is an ErrorReply to the one request, naming the limit;
// other peers' circuits are not affected. Everything arriving is hostile: frames are checked and bounded
// by the socket's limits, and nothing a peer sends can stop the loop.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/socket_options.hpp"

namespace dedloc::relay {

struct RelayLimits {
  size_t max_peers = 1024;
  size_t max_circuits = 64;                        // requesters at once, per peer
  double bytes_per_second = 32.0 * (1 << 20);      // per peer, both ways
  double burst_bytes = 256.0 * (1 << 20);          // the bucket's size (one state download part fits)
  std::uint64_t max_total_bytes = std::uint64_t{1} << 40;  // per attachment
  Duration idle = std::chrono::seconds(30);
  Duration attach_window = std::chrono::seconds(60);  // an attach proof's time may be this far off
};

struct RelayOptions {
  std::string listen = "tcp://0.0.0.0:0";
  RelayLimits limits;
  net::SocketOptions socket;
  Logger* log = &Logger::global();
};

struct RelayStats {
  size_t attached = 0;                 // peers with a circuit now
  std::uint64_t attaches = 0;          // accepted, ever
  std::uint64_t attaches_refused = 0;
  std::uint64_t forwarded = 0;         // requests passed down a circuit
  std::uint64_t replies = 0;           // replies passed back
  std::uint64_t bytes = 0;             // through circuits, both ways
  std::uint64_t refused = 0;           // requests answered with an error (no such peer, over a limit)
};

class RelayLoop;  // relay_server.cpp

class RelayServer {
 public:
  RelayServer(zmq::context_t& context, const crypto::Identity& identity, RelayOptions options);
  ~RelayServer();  // stops
  RelayServer(const RelayServer&) = delete;
  RelayServer& operator=(const RelayServer&) = delete;

  // Binds and starts the loop. kUnavailable naming the address when it cannot be bound.
  Status start();
  const std::string& endpoint() const { return endpoint_; }  // as bound: "tcp://0.0.0.0:31338[/k/KEY]"
  void stop();  // idempotent; never waits on peers
  RelayStats stats() const;

 private:
  zmq::context_t& context_;
  crypto::PeerId self_;
  RelayOptions options_;
  std::shared_ptr<RelayLoop> loop_;
  std::thread thread_;
  std::string endpoint_;
};

}  // namespace dedloc::relay
