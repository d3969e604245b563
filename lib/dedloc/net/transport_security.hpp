// Encrypted transport (docs/security.md): ZeroMQ's CURVE mechanism, keyed by the peer's identity.
//
// A server given transport keys accepts only CURVE connections, and says so in its endpoint:
// "tcp://HOST:PORT/k/KEY", KEY its ed25519 public key (net/peer_address.hpp). A client dials such an
// endpoint with CURVE and the Curve25519 form of that key, so the handshake completes only with the holder
// of the matching secret key: every message after it is encrypted and authenticated (no one on the path
// can read, change, replay or inject frames), and the endpoint's key is proof of who answers. An endpoint
// without a key is dialled in plaintext: only a peer started with --plaintext advertises one.
//
// The keys derive from the identity (crypto_sign_ed25519_*_to_curve25519), so a peer has one key for
// signing and for its transport, and a DHT contact whose endpoint key does not hash to its PeerID is a lie.
// Through a relay, each hop is encrypted (the requester to the relay, the relay to the peer behind it), and
// the relay sees the messages it forwards: in a private run they are also signed end to end
// (wire/auth_frame.hpp). inproc:// endpoints skip CURVE (ZeroMQ applies no mechanism in-process).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"

namespace dedloc::net {

struct TransportKeys {
  crypto::PublicKey public_key{};  // ed25519: what endpoints carry after "/k/"
  crypto::CurveKeyPair curve;      // its Curve25519 form, and the secret half

  static std::shared_ptr<const TransportKeys> of(const crypto::Identity& identity);

  // The keys of this process, used by every server and client not given others (SocketOptions::transport);
  // the tools set them from their identity unless started with --plaintext (cli::load_identity). Null:
  // servers listen in plaintext.
  static std::shared_ptr<const TransportKeys> process_default();
  static void set_process_default(std::shared_ptr<const TransportKeys> keys);
};

// Whether this process's libzmq was built with CURVE (Debian's is, with libsodium).
bool curve_supported();
// Ok when it was; kUnavailable saying what to do (--plaintext, or another libzmq) otherwise.
Status require_curve();

// Makes `socket` a CURVE server with `keys` (call before bind). kUnavailable without CURVE in libzmq.
Status make_curve_server(zmq::socket_t& socket, const TransportKeys& keys);

// The endpoint a server bound at `bound` (or announced as `bound`) tells others: with "/k/KEY" when it
// has transport keys and `bound` names none yet.
std::string advertised_endpoint(const std::string& bound, const TransportKeys* keys);

// Connects `socket` to `endpoint`: with CURVE when the endpoint names a key (as client `own`, or a fresh
// keypair when null), in plaintext otherwise. kInvalidArgument for a malformed key or an endpoint ZeroMQ
// refuses; kUnavailable for a keyed endpoint when libzmq has no CURVE.
Status connect_to(zmq::socket_t& socket, std::string_view endpoint, const TransportKeys* own);

}  // namespace dedloc::net
