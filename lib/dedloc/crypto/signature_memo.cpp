#include "dedloc/crypto/signature_memo.hpp"

#include <cstring>

#include <sodium.h>

#include "dedloc/crypto/identity.hpp"

namespace dedloc::crypto {

namespace {

// Enough for every record a trainer keeps reading (a progress record per peer, the matchmaking and donor
// records of a round) many times over, at 64 KiB.
constexpr size_t kProcessSlots = 2048;

}  // namespace

SignatureMemo::SignatureMemo(size_t slots) : slots_(slots == 0 ? 1 : slots) {
  ensure_sodium_initialized();
  randombytes_buf(key_.data(), key_.size());
}

SignatureMemo::Digest SignatureMemo::digest(ByteSpan public_key, ByteSpan message, ByteSpan signature) const {
  // The key and signature have fixed sizes (verify_signature refuses others before asking), so the
  // concatenation is unambiguous; their lengths go in anyway, for a caller that does not check.
  crypto_generichash_state state;
  crypto_generichash_init(&state, key_.data(), key_.size(), sizeof(Digest));
  const std::uint64_t lengths[2] = {public_key.size(), signature.size()};
  crypto_generichash_update(&state, reinterpret_cast<const std::uint8_t*>(lengths), sizeof(lengths));
  crypto_generichash_update(&state, public_key.data(), public_key.size());
  crypto_generichash_update(&state, signature.data(), signature.size());
  crypto_generichash_update(&state, message.data(), message.size());
  Digest out{};
  crypto_generichash_final(&state, out.data(), out.size());
  return out;
}

size_t SignatureMemo::slot_of(const Digest& digest) const {
  std::uint64_t index = 0;
  std::memcpy(&index, digest.data(), sizeof(index));
  return static_cast<size_t>(index % slots_);
}

bool SignatureMemo::contains(const Digest& digest) const {
  std::lock_guard lock(mutex_);
  if (table_.empty()) return false;
  const size_t slot = slot_of(digest);
  return used_[slot] && table_[slot] == digest;
}

void SignatureMemo::remember(const Digest& digest) {
  std::lock_guard lock(mutex_);
  if (table_.empty()) {
    table_.resize(slots_);
    used_.assign(slots_, false);
  }
  const size_t slot = slot_of(digest);
  table_[slot] = digest;
  used_[slot] = true;
}

SignatureMemo& process_signature_memo() {
  static SignatureMemo memo(kProcessSlots);
  return memo;
}

}  // namespace dedloc::crypto
