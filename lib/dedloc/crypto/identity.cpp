#include "dedloc/crypto/identity.hpp"

#include <sodium.h>

#include "dedloc/core/check.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/crypto/signature_memo.hpp"

namespace dedloc::crypto {

void ensure_sodium_initialized() {
  static const int result = sodium_init();  // thread-safe static init; sodium_init itself is idempotent
  // Without a working CSPRNG no key can be made safely; there is nothing sensible to continue with.
  DEDLOC_CHECK(result >= 0, "libsodium failed to initialize");
}

Identity Identity::generate() {
  ensure_sodium_initialized();
  std::array<std::uint8_t, 32> seed{};
  randombytes_buf(seed.data(), seed.size());
  return from_seed(seed).value();
}

Result<Identity> Identity::from_seed(ByteSpan seed) {
  ensure_sodium_initialized();
  if (seed.size() != crypto_sign_SEEDBYTES) {
    return error(Code::kInvalidArgument, "an identity seed is 32 bytes, got " + std::to_string(seed.size()));
  }
  Identity id;
  std::copy(seed.begin(), seed.end(), id.seed_.begin());
  crypto_sign_seed_keypair(id.public_key_.data(), id.secret_key_.data(), id.seed_.data());
  id.peer_id_ = PeerId::from_public_key(id.public_key_);
  return id;
}

Result<Identity> Identity::load(const std::string& path) {
  auto text = read_file(path, 4096);
  if (!text) return text.status();
  std::string hex = *text;
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r' || hex.back() == ' ')) hex.pop_back();
  auto seed = from_hex(hex);
  if (!seed || seed->size() != crypto_sign_SEEDBYTES) {
    return error(Code::kMalformed, path + " is not a dedloc identity (expected 64 hex characters)");
  }
  return from_seed(*seed);
}

Result<Identity> Identity::load_or_create(const std::string& path) {
  auto loaded = load(path);
  if (loaded || loaded.status().code() != Code::kNotFound) return loaded;
  Identity fresh = generate();
  DEDLOC_RETURN_IF_ERROR(fresh.save(path));
  return fresh;
}

Status Identity::save(const std::string& path) const {
  return write_file_atomically(path, to_hex(seed_) + "\n", 0600);
}

Signature Identity::sign(ByteSpan message) const {
  Signature sig{};
  crypto_sign_detached(sig.data(), nullptr, message.data(), message.size(), secret_key_.data());
  return sig;
}

CurveKeyPair Identity::curve_keys() const {
  CurveKeyPair keys;
  // Both conversions succeed for a keypair libsodium made.
  crypto_sign_ed25519_pk_to_curve25519(keys.public_key.data(), public_key_.data());
  crypto_sign_ed25519_sk_to_curve25519(keys.secret_key.data(), secret_key_.data());
  return keys;
}

std::optional<CurveKey> curve_public_key(const PublicKey& ed25519) {
  ensure_sodium_initialized();
  CurveKey out{};
  if (crypto_sign_ed25519_pk_to_curve25519(out.data(), ed25519.data()) != 0) return std::nullopt;
  return out;
}

Result<PublicKey> parse_public_key(std::string_view hex, std::string_view what) {
  auto bytes = from_hex(hex);
  if (!bytes || bytes->size() != kPublicKeySize) {
    return error(Code::kInvalidArgument, std::string(what) + ": a public key is " +
                                             std::to_string(2 * kPublicKeySize) + " hex characters");
  }
  PublicKey key{};
  std::copy(bytes->begin(), bytes->end(), key.begin());
  return key;
}

bool verify_signature(ByteSpan public_key, ByteSpan message, ByteSpan signature) {
  ensure_sodium_initialized();
  if (public_key.size() != kPublicKeySize || signature.size() != kSignatureSize) return false;
  SignatureMemo& memo = process_signature_memo();
  const SignatureMemo::Digest digest = memo.digest(public_key, message, signature);
  if (memo.contains(digest)) return true;
  if (crypto_sign_verify_detached(signature.data(), message.data(), message.size(), public_key.data()) != 0) {
    return false;
  }
  memo.remember(digest);
  return true;
}

}  // namespace dedloc::crypto
