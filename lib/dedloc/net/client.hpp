// The RPC client: requests to many endpoints, many in flight, each with its own deadline.
//
// One loop thread owns a DEALER socket per remote endpoint (connected on first use, closed when idle, or when
// over `max_connections` the least recently used idle one) and matches replies to requests by request id.
// call() may be used from any thread, including from inside a completion callback. Every call completes
// exactly once: with the reply, with the remote peer's ErrorReply as a Status, with kTimeout at its
// deadline (a dead or silent peer), with kUnavailable when its connection was refused
// (ClientOptions::fail_when_refused), or with kCancelled when the client is destroyed.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/net/caller.hpp"
#include "dedloc/net/message.hpp"
#include "dedloc/net/socket_options.hpp"

namespace dedloc::net {

struct ClientOptions {
  crypto::PeerId self;                                 // written as the sender of every request
  SocketOptions socket;                                // linger, queue bounds, wire limits
  Duration idle_close = std::chrono::seconds(60);      // close a connection unused for this long
  Logger* log = &Logger::global();
  // Connections kept open at most (0: no bound). Opening one more first closes the least recently used
  // connection with no call in flight; connections with calls in flight are never closed, so the bound is
  // exceeded while more peers than that are awaited at once. Each connection costs ~60-140 KiB of ZeroMQ
  // buffers at both ends and three file descriptors (bench/dht/README.md); a client that talks to a
  // stream of different peers (a DHT node) would otherwise hold every one of them for `idle_close`.
  // (Last, so that positional initializers of the fields above stay valid.)
  size_t max_connections = 0;
  // Fail the calls to an endpoint as soon as a connection to it is refused (nobody listens there: a peer
  // whose process died, on a machine still up), with kUnavailable, instead of at their deadlines while
  // ZeroMQ retries the connection silently. Each connection is then watched by a ZeroMQ socket monitor
  // (two more inproc sockets and file descriptors), so it is for a client that talks to a few peers it
  // waits on (the averager's), not to a stream of them (a DHT node's).
  bool fail_when_refused = false;
  // With fail_when_refused: ZeroMQ retries a refused connection every 100 ms for as long as it stays open
  // (an idle one, up to idle_close), and under churn every dead peer we talked to lately draws ten attempts a
  // second, each a socket, a TCP handshake refused and a monitor event (bench/lab/README.md counts them in
  // the 64-peer churn). A watched connection's retries back off instead, doubling up to this. No call waits
  // on them: a call to an endpoint refused when last tried gets a fresh connection (0: ZeroMQ's fixed
  // interval).
  Duration refused_retry_max = std::chrono::seconds(5);
};

struct ClientStats {
  size_t open_connections = 0;        // now
  std::uint64_t connections_opened = 0;  // since the client started
  std::uint64_t refused_attempts = 0;    // connection attempts seen refused, on watched connections
};

class ClientLoop;  // client.cpp

class Client : public Caller {
 public:
  using Callback = Caller::Callback;

  // Throws std::system_error when the process is out of file descriptors (its mailbox needs one).
  Client(zmq::context_t& context, ClientOptions options);
  ~Client() override;  // fails calls still in flight with kCancelled; never waits for remote peers
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` to `endpoint` ("tcp://host:port"). `done` runs exactly once, on the client's loop
  // thread: keep it short, and hand heavy work to another thread.
  void call(const std::string& endpoint, Outgoing request, Deadline deadline, Callback done) override;
  using Caller::call;

  // Fails every call in flight now with kCancelled, at once, and leaves the client usable: for a caller
  // that must stop waiting (a shutdown signal) while other threads wait on the network. Calls made after
  // it proceed as usual. Thread-safe; does not wait for the loop.
  void cancel_pending() override;

  // Closes our connection to `endpoint` (if any) without waiting: what is queued to it is dropped — ZeroMQ
  // gives back zero-copy frames at once, from its I/O thread — and calls in flight to it fail with
  // kCancelled. For a caller that lent memory to frames sent to a peer it has given up on (avg::AllReduce)
  // and must have that memory back. Ordered after the calls this thread made before it; a later call to
  // `endpoint` connects anew. Thread-safe.
  void disconnect(const std::string& endpoint);

  ClientStats stats() const;

 private:
  std::shared_ptr<ClientLoop> loop_;
  std::thread thread_;
};

}  // namespace dedloc::net
