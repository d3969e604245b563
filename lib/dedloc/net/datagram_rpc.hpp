// RPCs over UDP: one socket that both serves requests and sends ours, one datagram per message
// (wire/datagram.hpp). How DHT nodes talk: a node asks a stream of different peers a few small questions
// each, and a ZeroMQ connection per peer costs ~60-140 KiB of buffers at both ends and three file
// descriptors (bench/dht/README.md); a datagram costs nothing once sent.
//
// Endpoints are the stream transport's ("tcp://HOST:PORT/k/KEY"): a peer that serves datagrams binds UDP
// on the port of its ZeroMQ server. What a datagram cannot carry goes over that server instead, through
// the stream Caller given at construction (net::Client): requests larger than max_datagram_bytes, calls to
// hosts that are not IPv4 addresses (names, relays, inproc://), and calls whose reply turns out too large
// (the server answers kUseStream and the call is made again over the stream).
//
// Security, as with CURVE on the stream: to an endpoint that names a key, requests are sealed for that key
// with ours (crypto_box), and only replies sealed by that key are taken; a server with transport keys
// answers only sealed requests, and seals its replies for the requester's key. A private run's
// authentication frame travels inside, checked as on the stream (net/message.hpp). Request ids are random.
//
// Loss: a request unanswered for `retransmit_after` (or twice the recent round trip, if longer) is sent
// again, the interval doubling, until its deadline (framed anew: a private run's authentication frame must
// not look replayed); servers answer every copy (a store of an entry already held succeeds:
// dht/storage.hpp).
//
// Amplification: anyone can write another host's address as a datagram's source. A reply more than 3x
// the size of its request is sent only to an address that has shown it receives our datagrams: otherwise
// the server answers with a cookie (kRetry, as small as the request), and the requester asks again with it.
// Cookies are a keyed hash of the address and the time, so the server keeps no state per requester.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/net/caller.hpp"
#include "dedloc/net/rate_limiter.hpp"
#include "dedloc/net/replier.hpp"
#include "dedloc/net/socket_options.hpp"

namespace dedloc::net {

struct DatagramOptions {
  crypto::PeerId self;  // written as the sender of every message
  // Transport keys (sealing), access control (a private run's authentication frames) and wire limits. Null
  // keys or access: the process's defaults (resolve_process_defaults).
  SocketOptions socket;
  Logger* log = &Logger::global();
  const Clock* clock = &SystemClock::instance();  // the wall clock a Pong reports
  PeerRateLimits peer_limits;                     // per source address
  // Datagrams are at most this large; what is larger goes over the stream. IP splits a datagram larger than
  // the path's MTU into fragments, and losing one loses the datagram, so this stays well below the 64 KiB
  // that UDP allows: a lookup's messages (a few contacts, a few small values) are 0.2-3 KiB.
  size_t max_datagram_bytes = 16 * 1024;
  // A request unanswered this long (or twice the recent round trip, if longer) is sent again.
  Duration retransmit_after = std::chrono::milliseconds(300);
  // How long a cookie stays valid (at least; at most twice this).
  Duration cookie_lifetime = std::chrono::seconds(120);
  // Peers whose shared keys (and servers whose cookies) are remembered; beyond it they are computed anew.
  size_t max_remembered_peers = 1024;
  // An address whose port answered a datagram "port unreachable" (ICMP) listens on the stream only (a node
  // with datagrams off, or of a release before them): calls to it go over the stream for this long.
  Duration stream_only_memory = std::chrono::minutes(10);
};

struct DatagramStats {
  std::uint64_t requests = 0;        // requests served (dispatched to a handler)
  std::uint64_t rejected = 0;        // datagrams dropped or refused: malformed, unsealed, forged, unauthorized
  std::uint64_t rate_limited = 0;    // dropped before opening: the source address was over its PeerRateLimits
  std::uint64_t calls = 0;           // calls made
  std::uint64_t retransmits = 0;     // requests sent again after no reply
  // Calls that went over the stream: too large, not to an IPv4 host, or to an address that takes no datagrams.
  std::uint64_t streamed = 0;
  std::uint64_t cookie_retries = 0;  // requests asked again with a cookie
  // "Port unreachable" answers to our datagrams (a node without datagrams): its calls went over the stream.
  std::uint64_t ports_unreachable = 0;
};

class DatagramLoop;  // datagram_rpc.cpp

class DatagramRpc : public Caller {
 public:
  // `stream`: where calls go that a datagram cannot carry; it must outlive every call made through us.
  DatagramRpc(DatagramOptions options, Caller& stream);
  ~DatagramRpc() override;  // stops
  DatagramRpc(const DatagramRpc&) = delete;
  DatagramRpc& operator=(const DatagramRpc&) = delete;

  // Registers the handler for one message type (replacing any earlier one). Before start(). Ping is built in.
  void handle(wire::MessageType type, Handler handler);
  template <class Message>
  void handle(std::function<void(Message&& message, Incoming&& request, Replier replier)> handler) {
    handle(Message::kType, typed_handler<Message>(std::move(handler)));
  }

  // Binds UDP at `host` (an IPv4 address; "0.0.0.0" for all) and `port` (0: any free one) and starts the
  // loop thread. `serve`: answer requests (otherwise they are dropped: a client-mode node). kUnavailable
  // when the address cannot be bound (the port is taken, say), naming it.
  Status start(const std::string& host, std::uint16_t port, bool serve);
  // The UDP port bound; 0 before start().
  std::uint16_t port() const { return port_; }
  // Stops the loop and closes the socket; calls in flight fail with kCancelled, and later calls go over the
  // stream. Idempotent.
  void stop();

  void call(const std::string& endpoint, Outgoing request, Deadline deadline, Callback done) override;
  using Caller::call;
  void cancel_pending() override;

  DatagramStats stats() const;

 private:
  DatagramOptions options_;
  Caller& stream_;
  std::map<wire::MessageType, Handler> handlers_;
  std::shared_ptr<DatagramLoop> loop_;
  std::thread thread_;
  mutable std::mutex submit_mutex_;  // orders call() against stop(), which releases loop_
  DatagramStats final_stats_;        // loop_'s, once stopped
  std::atomic<bool> stopped_{false};
  std::uint16_t port_ = 0;
};

}  // namespace dedloc::net
