// The RPC server: a ROUTER socket and one loop thread that decodes requests and dispatches them to
// handlers registered per message type.
//
// Handlers run on the loop thread and answer through a Replier, either at once or later from any
// thread (a leader answering join requests when its group is complete). Requests that cannot be decoded
// (random bytes, truncated frames, wrong magic or version, over a limit) are answered with an ErrorReply
// when the request id is readable, otherwise dropped; either way the server keeps serving everyone else.
// Built in: Ping -> Pong, Probe -> ProbeReply.
//
// Flood control: ZeroMQ already takes requests from the connections in turn (fair queuing), so a
// peer flooding one connection delays another peer's request by at most the requests ahead of it in that
// turn. On top, each connection has token buckets for requests and bytes (PeerRateLimits): a request
// over them is answered at once with kRefused, and its handler never runs, so a flood costs this peer
// little work and no memory beyond the bounded queues (SocketOptions' high-water marks). In a private run
// a request that fails its access check costs its connection 100 requests' worth: a flood of bad tokens
// or signatures is checked at 1/100 of the rate.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/net/message.hpp"
#include "dedloc/net/rate_limiter.hpp"
#include "dedloc/net/replier.hpp"
#include "dedloc/net/socket_options.hpp"

namespace dedloc::net {

struct ServerOptions {
  std::string listen = "tcp://127.0.0.1:0";  // ZeroMQ endpoint to bind; port 0 picks a free port
  crypto::PeerId self;                        // written as the sender of every reply
  SocketOptions socket;                       // linger, queue bounds, wire limits
  Logger* log = &Logger::global();
  const Clock* clock = &SystemClock::instance();  // the wall clock a Pong reports (tests skew it)
  // More endpoints on the same socket, e.g. "inproc://NAME" for a relay link in this process (requests that
  // arrive through a relay then skip a loopback TCP hop).
  std::vector<std::string> also_listen;
  PeerRateLimits peer_limits;
};

struct ServerStats {
  std::uint64_t requests = 0;   // decoded and dispatched
  std::uint64_t rejected = 0;   // malformed, wrong version, over a limit, unknown type
  std::uint64_t rate_limited = 0;  // refused before decoding: the connection was over its PeerRateLimits
};

// Ping -> Pong with `clock`'s time and our version: what every server answers.
Handler ping_handler(const Clock* clock);

class ServerLoop;  // the loop thread's state (server.cpp)

class Server {
 public:
  using Handler = net::Handler;

  Server(zmq::context_t& context, ServerOptions options);
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Registers the handler for one message type (replacing any earlier one). Call before start().
  void handle(wire::MessageType type, Handler handler);

  // A handler that receives the decoded message; a body that does not decode is answered with kMalformed.
  template <class Message>
  void handle(std::function<void(Message&& message, Incoming&& request, Replier replier)> handler) {
    handle(Message::kType, typed_handler<Message>(std::move(handler)));
  }

  // Binds and starts the loop thread. kUnavailable when the address cannot be bound, or the process is out
  // of file descriptors.
  Status start();
  // The endpoint really bound, as others dial it: "tcp://127.0.0.1:41234", and "/k/KEY" after it when the
  // transport is encrypted (SocketOptions::transport). Valid after start().
  const std::string& endpoint() const { return endpoint_; }
  // `public_endpoint` (an --announce address: what others dial to reach us through NAT or a proxy) with our
  // transport key when we listen encrypted.
  std::string advertise(const std::string& public_endpoint) const {
    return advertised_endpoint(public_endpoint, options_.socket.transport.get());
  }
  // Stops the loop and closes the socket; never waits for remote peers. Idempotent.
  void stop();

  ServerStats stats() const;

 private:
  zmq::context_t& context_;
  ServerOptions options_;
  std::map<wire::MessageType, Handler> handlers_;
  std::shared_ptr<ServerLoop> loop_;
  std::thread thread_;
  std::string endpoint_;
};

}  // namespace dedloc::net
