// Access tokens for a private collaboration (docs/security.md): the run's authority (an ed25519 keypair
// kept by whoever runs the collaboration) signs, for one peer's public key, a name and an expiry. A peer
// started with --authority PUBKEY --token FILE presents its token with every message, and accepts only
// messages carrying a valid token from that authority (net/access_control.hpp).
//
// Binary form (fixed layout, big-endian; what is signed is everything before the signature):
//   "DLT1" | authority public key (32) | peer public key (32) | expires, unix seconds (u64) |
//   name length (u8, at most kMaxTokenName) | name (UTF-8) | signature (64)
// Text form (token files): "dedloc-token-v1:" followed by the binary form in hex, on one line.
#pragma once

#include <cstdint>
#include <string>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"

namespace dedloc::crypto {

inline constexpr size_t kMaxTokenName = 64;

struct AccessToken {
  PublicKey authority{};
  PublicKey peer{};
  std::uint64_t expires = 0;  // unix seconds
  std::string name;           // who it was issued to, for logs and revocation lists
  Signature signature{};

  // The authority's signature over the fields above. `name` longer than kMaxTokenName is an error.
  static Result<AccessToken> issue(const Identity& authority, const PublicKey& peer, std::string name,
                                   std::uint64_t expires);

  Bytes encode() const;
  // Decodes the binary form (any bytes: a hostile peer sends it). kMalformed names what is wrong.
  static Result<AccessToken> decode(ByteSpan bytes);

  std::string to_text() const;
  static Result<AccessToken> from_text(std::string_view text);
  // Reads a token file (its text form; surrounding whitespace ignored). The path is named in errors.
  static Result<AccessToken> load(const std::string& path);
  // Writes the text form atomically.
  Status save(const std::string& path) const;

  // Checks the token for a run whose authority is `trusted`, at `now` (unix seconds). kUnauthorized with
  // the reason: signed by another authority, a forged signature, expired.
  Status verify(const PublicKey& trusted, double now) const;
  // The PeerID the token was issued to.
  PeerId peer_id() const;
};

}  // namespace dedloc::crypto
