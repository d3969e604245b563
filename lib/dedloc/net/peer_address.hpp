// A peer's full address as operators pass it around: "tcp://HOST:PORT/p/PEERID", or, for a peer behind NAT,
// "relay://HOST:PORT/p/PEERID": the peer PEERID reached through the relay at HOST:PORT (DESIGN §8).
//
// The endpoint part is what ZeroMQ dials; the optional "/p/<40 hex>" suffix names who must answer there,
// so a bootstrap peer that was replaced by another process on the same port is noticed instead of trusted.
// Also accepted: "tcp://HOST:PORT" and "HOST:PORT" (no identity check).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::net {

struct PeerAddress {
  std::string endpoint;                  // "tcp://host:port"; for a relayed peer the whole relay:// address
  std::optional<crypto::PeerId> peer_id;

  static Result<PeerAddress> parse(std::string_view text);
  // Every address of a --initial-peers list; the first bad one's error names `flag`.
  static Result<std::vector<PeerAddress>> parse_all(const std::vector<std::string>& texts, std::string_view flag);
  std::string to_string() const;  // the endpoint, plus "/p/<id>" when the id is known
};

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};

// A relayed peer's route: the relay's tcp:// endpoint and the peer behind it.
struct RelayRoute {
  std::string relay_endpoint;  // "tcp://host:port"
  crypto::PeerId target;
};
// nullopt when `endpoint` is not a relay:// address; kInvalidArgument when it is one but malformed.
Result<std::optional<RelayRoute>> parse_relay_endpoint(std::string_view endpoint);
// "relay://HOST:PORT/p/PEERID" for `peer` behind the relay at `relay_endpoint` ("tcp://HOST:PORT").
std::string relay_address(const std::string& relay_endpoint, const crypto::PeerId& peer);

// Splits "tcp://host:port" (IPv4, a name, or "[v6]"); kInvalidArgument naming the problem otherwise.
Result<HostPort> parse_tcp_endpoint(std::string_view endpoint);

// True for hosts that a remote peer cannot dial: "0.0.0.0", "*", "::", "[::]".
bool is_wildcard_host(std::string_view host);

// The local IPv4 address this machine would use to reach `remote_host` (no packet is sent: a UDP socket
// is connected and asked its name). "127.0.0.1" when there is no route or `remote_host` is not an address.
std::string local_address_toward(const std::string& remote_host);

// The endpoint to tell others: `bound` as is, or with a wildcard host replaced by the address we would use
// to reach `toward_host` (the first initial peer's host, say).
std::string dialable_endpoint(const std::string& bound, const std::string& toward_host);

}  // namespace dedloc::net
