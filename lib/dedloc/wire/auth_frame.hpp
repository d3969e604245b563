// The authentication frame of a private run (net/access_control.hpp): the sender's access token
// and its signature over the message's header frame, with a time and a nonce against replays.
//
// A message that carries one says so in its header ("auth": 1, wire/envelope.hpp); the frame then follows
// the payload frames (which the header's "nf" counts without it). Fixed layout, big-endian:
//   "DLA1" | token length (u16) | token (crypto/access_token.hpp's binary form) | time, unix ms (u64) |
//   nonce (16 random bytes) | signature (64)
// The signature is the token's peer's, over auth_signed_bytes(): a domain tag, the header frame's exact
// bytes, the time and the nonce. Payload frames (tensor parts) are not signed: the token says who may
// take part; integrity of the bytes in flight is the transport's (ZeroMQ CURVE) business.
#pragma once

#include <array>
#include <cstdint>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"

namespace dedloc::wire {

inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMaxAuthTokenBytes = 512;  // a token is 205 bytes at most today

struct AuthFrame {
  Bytes token;
  std::uint64_t time_ms = 0;
  std::array<std::uint8_t, kNonceBytes> nonce{};
  crypto::Signature signature{};
};

Bytes encode_auth_frame(const AuthFrame& frame);
// Any bytes; kMalformed with the reason.
Result<AuthFrame> decode_auth_frame(ByteSpan bytes);
// What the signature covers.
Bytes auth_signed_bytes(ByteSpan header, std::uint64_t time_ms, const std::array<std::uint8_t, kNonceBytes>& nonce);

}  // namespace dedloc::wire
