// Relay circuits (docs/wire-protocol.md, "Relays"): how a peer behind NAT stays reachable.
//
// A peer in client mode cannot be dialled, so it dials a relay (a DEALER to the relay's ROUTER) and keeps
// that connection open: its circuit. Anyone can then reach it at "relay://HOST:PORT/k/RELAYKEY/p/PEERID": a requester
// dials the relay and puts one routing frame before an ordinary dedloc request; the relay passes the
// request down the circuit, and the peer's answer back, untouched. Requests and replies stay end-to-end
// dedloc messages (the reply's sender is the peer, as if dialled directly); only the first frame is the
// relay's.
//
// Routing frame: "DLR1", a tag byte, then the tag's id bytes (at most kMaxRelayIdBytes):
//   'F' + target PeerID (20)   requester -> relay: forward the frames that follow to that peer
//   'Q' + token                relay -> peer: a forwarded request; token names its requester
//   'R' + token                peer -> relay: the reply to the request with that token
//   'A'                        peer -> relay: attach; one frame follows: the attach proof (below)
//   'a'                        relay -> peer: the answer to an attach; one frame follows: an AttachAnswer
//   'H'                        peer -> relay and back: heartbeat (the relay echoes it)
// A relay that cannot forward a request (no such peer attached, over a limit) answers the requester with
// an ordinary ErrorReply to that request id: kNotFound or kRefused, saying why.
//
// Attach proof, a msgpack map {"key": bin32 public key, "t": uint unix milliseconds, "sig": bin64}: an
// ed25519 signature over "dedloc-relay-attach-v1" || relay PeerID (20) || t (u64 little-endian). It binds
// the circuit to the key's PeerID for this relay only, within a time window, so nobody can take over
// another peer's circuit or replay an old attach elsewhere. In a private run the map also holds "tok": bin,
// the peer's access token (crypto/access_token.hpp), which the relay checks against the run's authority
// and the key (it needs no signature of its own: the authority's covers it, and it names the key).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::wire {

enum class RelayTag : std::uint8_t {
  kForward = 'F',
  kRequest = 'Q',
  kReply = 'R',
  kAttach = 'A',
  kAttachAnswer = 'a',
  kHeartbeat = 'H',
};

inline constexpr size_t kMaxRelayIdBytes = 255;

struct RelayFrame {
  RelayTag tag{};
  Bytes id;  // the target PeerID ('F') or the requester token ('Q', 'R'); empty otherwise
};

Bytes encode_relay_frame(RelayTag tag, ByteSpan id = {});
// nullopt when `frame` does not start with "DLR1" (an ordinary dedloc header); kMalformed for an unknown
// tag, an over-long id, or an 'F' whose id is not 20 bytes.
Result<std::optional<RelayFrame>> decode_relay_frame(ByteSpan frame);

Bytes encode_attach_proof(const crypto::Identity& identity, const crypto::PeerId& relay, std::uint64_t unix_ms,
                          ByteSpan access_token = {});
struct AttachProof {
  crypto::PeerId peer;  // whom the circuit is for
  Bytes access_token;   // the token it carries; empty when it has none (an open run)
};
// The proof's PeerID and token; kUnauthorized when the signature does not verify or `t` is more than
// `window_ms` away from `now_ms`; kMalformed for anything that does not decode.
Result<AttachProof> verify_attach_proof(ByteSpan proof, const crypto::PeerId& relay, std::uint64_t now_ms,
                                        std::uint64_t window_ms);

// The relay's answer to an attach, a msgpack map {"code": uint (0: attached), "why": str}.
Bytes encode_attach_answer(const Status& status);
Status decode_attach_answer(ByteSpan answer);

}  // namespace dedloc::wire
