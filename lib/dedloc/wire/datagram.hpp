// One RPC message in one UDP datagram: how DHT nodes talk (net/datagram_rpc.hpp). docs/wire-protocol.md
// specifies this in prose.
//
// Layout, big-endian:
//   "DG" | version (1) | flags (bit 0: sealed)
//   sealed: the sender's ed25519 public key (32) | nonce (24) | box: libsodium's crypto_box (XSalsa20-
//           Poly1305, 16-byte tag first) of the body, under the X25519 key of the sender's and the
//           receiver's Curve25519 keys (both derived from their identities, crypto/identity.hpp)
//   plain:  the body (a peer started with --plaintext, or a receiver whose endpoint names no key)
// body:
//   kind (u8) | request id (u64) | cookie length (u8: 0 or 16) | cookie | frame count (u8) |
//   per frame: length (u32) | bytes
// The frames are a message's frames as on a ZeroMQ connection (wire/envelope.hpp: the header, payload
// frames, the authentication frame of a private run); replies to a retry or a use-the-stream kind carry
// none. Decoding any bytes gives a Status, never a crash.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"

namespace dedloc::wire {

enum class DatagramKind : std::uint8_t {
  kRequest = 1,
  kReply = 2,
  // The reply is larger than the request allows to an address not yet shown to be the sender's (an
  // amplification guard): ask again with the cookie this datagram carries.
  kRetry = 3,
  // The reply does not fit in a datagram: ask again over the stream transport (ZeroMQ, same host and port).
  kUseStream = 4,
};

inline constexpr size_t kCookieBytes = 16;
using Cookie = std::array<std::uint8_t, kCookieBytes>;
inline constexpr size_t kDatagramNonceBytes = 24;
inline constexpr size_t kDatagramTagBytes = 16;
// The most a UDP datagram over IPv4 carries.
inline constexpr size_t kMaxDatagramBytes = 65507;
// The plain header, and what sealing adds to a body.
inline constexpr size_t kDatagramPrefixBytes = 4;
inline constexpr size_t kSealOverheadBytes = crypto::kPublicKeySize + kDatagramNonceBytes + kDatagramTagBytes;

struct DatagramBody {
  DatagramKind kind = DatagramKind::kRequest;
  std::uint64_t request_id = 0;
  std::optional<Cookie> cookie;
  std::vector<Bytes> frames;
};

Bytes encode_datagram_body(const DatagramBody& body);
// kMalformed (wrong kind, truncated, trailing bytes, a cookie of another length), kTooLarge (more frames
// than `max_frames`).
Result<DatagramBody> decode_datagram_body(ByteSpan bytes, size_t max_frames);

// A symmetric key two peers share (crypto_box_beforenm of one's secret and the other's public key).
using SharedKey = std::array<std::uint8_t, 32>;
// nullopt when `their_public` (ed25519) is not a valid point.
std::optional<SharedKey> datagram_shared_key(const crypto::PublicKey& their_public, const crypto::CurveKey& our_secret);

// The whole datagram: sealed with `shared` when given (our ed25519 key travels with it), plain otherwise.
Bytes encode_datagram(ByteSpan body, const crypto::PublicKey* sender, const SharedKey* shared);

// A datagram's prefix read: who sealed it (nullopt: plain) and what follows.
struct DatagramEnvelope {
  std::optional<crypto::PublicKey> sender;
  ByteSpan sealed_or_body;  // with a sender: nonce and box; without: the body
};
// kMalformed (too short, wrong magic or flags), kVersionMismatch.
Result<DatagramEnvelope> decode_datagram(ByteSpan bytes);
// The body of a sealed datagram; kUnauthorized when the box does not open with `shared` (forged, altered,
// or sealed for someone else).
Result<Bytes> open_datagram(const DatagramEnvelope& envelope, const SharedKey& shared);

}  // namespace dedloc::wire
