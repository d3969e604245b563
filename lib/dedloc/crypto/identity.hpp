// A peer's identity: an ed25519 keypair (libsodium) and the PeerID derived from its public key.
//
// Stored on disk as one line of hex (the 32-byte seed) in a file created with mode 0600. A peer that is
// given no identity file makes a fresh one in memory: it is then a new peer at every start.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::crypto {

inline constexpr size_t kPublicKeySize = 32;
inline constexpr size_t kSignatureSize = 64;
using PublicKey = std::array<std::uint8_t, kPublicKeySize>;
using Signature = std::array<std::uint8_t, kSignatureSize>;

// Curve25519 keys, the form ZeroMQ's CURVE transport takes (net/transport_security.hpp). Ours are derived
// from the ed25519 identity, so one key names a peer both as a signer and as a transport endpoint.
inline constexpr size_t kCurveKeySize = 32;
using CurveKey = std::array<std::uint8_t, kCurveKeySize>;
struct CurveKeyPair {
  CurveKey public_key{};
  CurveKey secret_key{};
};

// The Curve25519 form of an ed25519 public key; nullopt for bytes that are not a valid ed25519 point
// (anyone can write such a key into an address).
std::optional<CurveKey> curve_public_key(const PublicKey& ed25519);

// Must be called once before any other crypto function; safe to call many times and from many threads.
void ensure_sodium_initialized();

class Identity {
 public:
  static Identity generate();
  // Deterministic from a 32-byte seed (tests, and loading from disk).
  static Result<Identity> from_seed(ByteSpan seed);
  // Loads the identity at `path`, or creates it there (mode 0600) when the file does not exist.
  // A file that exists but does not hold a valid identity is an error: never silently replaced.
  static Result<Identity> load_or_create(const std::string& path);
  static Result<Identity> load(const std::string& path);
  Status save(const std::string& path) const;

  const PublicKey& public_key() const { return public_key_; }
  const PeerId& peer_id() const { return peer_id_; }

  Signature sign(ByteSpan message) const;
  // This identity's Curve25519 keypair (its public half is curve_public_key(public_key())).
  CurveKeyPair curve_keys() const;

 private:
  Identity() = default;
  std::array<std::uint8_t, 32> seed_{};
  std::array<std::uint8_t, 64> secret_key_{};  // libsodium's form: seed || public key
  PublicKey public_key_{};
  PeerId peer_id_;
};

// Parses a public key from hex (64 characters), naming `what` in the error ("--authority").
Result<PublicKey> parse_public_key(std::string_view hex, std::string_view what);

// True when `signature` is `public_key`'s signature over `message`. A triple that verified once is remembered
// (crypto/signature_memo.hpp): checking it again costs a hash.
bool verify_signature(ByteSpan public_key, ByteSpan message, ByteSpan signature);

}  // namespace dedloc::crypto
