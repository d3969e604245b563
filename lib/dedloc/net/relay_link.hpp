// The client-mode side of a relay circuit (wire/relay_frames.hpp): a peer behind NAT dials a
// relay, proves its PeerID, and from then on answers, through that one outbound connection, the requests
// others address to "relay://RELAY/k/RELAYKEY/p/OURID". Each forwarded request is handed to our own Server (on a
// local endpoint nobody outside can dial) over a connection per requester, so the Server sees ordinary
// requests and its replies find their way back.
//
// Liveness: a heartbeat every `heartbeat`; when the relay has not echoed one for `dead_after`, the link is
// dead (alive() false, failure() says why) and its owner attaches elsewhere (RelayKeeper).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/socket_options.hpp"

namespace dedloc::net {

struct RelayLinkOptions {
  PeerAddress relay;                                   // tcp://HOST:PORT/k/RELAYKEY (the id is required)
  std::string local_endpoint;                          // our Server, where forwarded requests go
  Duration heartbeat = std::chrono::seconds(2);
  Duration dead_after = std::chrono::seconds(6);
  Duration attach_timeout = std::chrono::seconds(5);
  Duration requester_idle = std::chrono::seconds(60);  // a requester's local connection closes after this
  SocketOptions socket;
  Logger* log = &Logger::global();
};

class RelayLinkLoop;  // relay_link.cpp

class RelayLink {
 public:
  RelayLink(zmq::context_t& context, const crypto::Identity& identity, RelayLinkOptions options);
  ~RelayLink();  // stops
  RelayLink(const RelayLink&) = delete;
  RelayLink& operator=(const RelayLink&) = delete;

  // Attaches, waiting up to attach_timeout for the relay's answer: kRefused or kUnauthorized with the
  // relay's reason, kTimeout when it does not answer, kInvalidArgument without a relay id.
  Status start();
  bool alive() const;
  Status failure() const;       // why it is not alive (ok while it is)
  const std::string& address() const { return address_; }  // relay://HOST:PORT/k/RELAYKEY/p/OURID
  const PeerAddress& relay() const { return options_.relay; }
  void stop();

 private:
  zmq::context_t& context_;
  const crypto::Identity& identity_;
  RelayLinkOptions options_;
  std::string address_;
  std::shared_ptr<RelayLinkLoop> loop_;
  std::thread thread_;
};

}  // namespace dedloc::net
