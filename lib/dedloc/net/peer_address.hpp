// A peer's full address as operators pass it around:
//   "tcp://HOST:PORT/k/KEY"      a peer whose transport is encrypted (CURVE, net/transport_security.hpp);
//                                KEY is its ed25519 public key in hex, which also names it (PeerID = hash(KEY))
//   "tcp://HOST:PORT/p/PEERID"   a peer that talks plaintext (started with --plaintext)
//   "relay://HOST:PORT[/k/RELAYKEY]/p/PEERID"
//                                the peer PEERID behind NAT, reached through the relay at HOST:PORT
//
// The endpoint part, with its key, is what a Client dials: the key travels with the endpoint through DHT
// contacts, records and member lists, so whoever learns where a peer is also learns how to reach it
// securely. The PeerID names who must answer there, so a bootstrap peer that was replaced by another process
// on the same port is noticed instead of trusted. Also accepted: "tcp://HOST:PORT" and "HOST:PORT" (no
// identity check, plaintext).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::net {

struct PeerAddress {
  std::string endpoint;  // "tcp://host:port[/k/KEY]"; for a relayed peer the whole relay:// address
  std::optional<crypto::PeerId> peer_id;

  static Result<PeerAddress> parse(std::string_view text);
  // Every address of a --initial-peers list; the first bad one's error names `flag`.
  static Result<std::vector<PeerAddress>> parse_all(const std::vector<std::string>& texts, std::string_view flag);
  // The endpoint, plus "/p/<id>" when the id is known and the endpoint's key does not already name it.
  std::string to_string() const;
  // True for an endpoint dialled with CURVE: a tcp:// one with a key, or a relay reached with one.
  bool encrypted() const;
};

// An endpoint split into what ZeroMQ dials and the server's transport key, if it names one.
struct KeyedEndpoint {
  std::string dial;                       // "tcp://host:port" (or inproc://, ipc://: never keyed)
  std::optional<crypto::PublicKey> key;   // the server's ed25519 public key, from "/k/KEY"
};
// kInvalidArgument for a "/k/" that is not followed by 64 hex digits. (Whether those are a valid curve point
// is checked when the endpoint is dialled: net::connect_to.)
Result<KeyedEndpoint> split_endpoint_key(std::string_view endpoint);
// `endpoint` with "/k/<hex key>" appended.
std::string with_endpoint_key(std::string_view endpoint, const crypto::PublicKey& key);
// False when `endpoint` names a key that is not `id`'s: someone claims an id whose key they do not hold.
// True for endpoints without a key (nothing to check) and for those whose key is `id`'s.
bool endpoint_key_matches(std::string_view endpoint, const crypto::PeerId& id);
// What a DHT contact's endpoint (or a request's sender endpoint) must be: tcp://, well formed, and with no key
// or `id`'s key. One parse: it runs for every request a node serves.
bool is_contact_endpoint(std::string_view endpoint, const crypto::PeerId& id);

struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  std::optional<crypto::PublicKey> key;  // from "/k/KEY"
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

// Splits "tcp://host:port[/k/KEY]" (IPv4, a name, or "[v6]"); kInvalidArgument naming the problem otherwise.
Result<HostPort> parse_tcp_endpoint(std::string_view endpoint);

// True for hosts that a remote peer cannot dial: "0.0.0.0", "*", "::", "[::]".
bool is_wildcard_host(std::string_view host);

// The local IPv4 address this machine would use to reach `remote_host` (no packet is sent: a UDP socket
// is connected and asked its name). "127.0.0.1" when there is no route or `remote_host` is not an address.
std::string local_address_toward(const std::string& remote_host);

// The endpoint to tell others: `bound` as is, or with a wildcard host replaced by the address we would use
// to reach `toward_host` (the first initial peer's host, say). A key in `bound` is kept.
std::string dialable_endpoint(const std::string& bound, const std::string& toward_host);

}  // namespace dedloc::net
