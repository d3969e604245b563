// Socket settings every dedloc socket gets: bounded linger (shutdown never hangs on a dead peer) and a
// maximum inbound frame size (a peer cannot make us buffer an arbitrarily large frame).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <zmq.hpp>

#include "dedloc/net/access_control.hpp"
#include "dedloc/net/transport_security.hpp"
#include "dedloc/wire/limits.hpp"

namespace dedloc::net {

struct SocketOptions {
  std::chrono::milliseconds linger{0};  // how long close() may wait to flush unsent messages
  int send_hwm = 10000;                 // queued outbound messages per peer before sends would block
  int receive_hwm = 10000;              // queued inbound messages per peer
  wire::Limits limits;                  // ZMQ_MAXMSGSIZE comes from these
  // A private run's access control: messages sent are sealed, messages received are checked
  // (net/access_control.hpp). Null: the process's (AccessControl::process_default(), which the tools set
  // from --authority/--token), taken when the server or client is made; null there too in an open run.
  std::shared_ptr<AccessControl> access;
  // This peer's CURVE keys (net/transport_security.hpp): servers listen encrypted and advertise them, clients
  // present them. Null: the process's (TransportKeys::process_default(), set by the tools from their identity
  // unless --plaintext), taken when the server or client is made; null there too: servers listen in plaintext.
  std::shared_ptr<const TransportKeys> transport;
};

// Fills `access` and `transport` from the process's defaults where they are null.
void resolve_process_defaults(SocketOptions& options);

void apply_socket_options(zmq::socket_t& socket, const SocketOptions& options);

// A server's ROUTER socket, as every dedloc server opens one: `options` applied, unroutable replies reported
// (router_mandatory) rather than dropped, CURVE with `options.transport` when set, bound at `listen`.
// `socket` is replaced; returns the endpoint others dial (with our key when encrypted). kUnavailable naming
// `listen` when it cannot be bound.
Result<std::string> open_router(zmq::context_t& context, zmq::socket_t& socket, const std::string& listen,
                                const SocketOptions& options);

// The endpoint a socket is really bound to ("tcp://127.0.0.1:41234" after binding port 0).
std::string last_endpoint(zmq::socket_t& socket);

}  // namespace dedloc::net
