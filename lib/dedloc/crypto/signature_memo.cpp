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
  Hasher hasher(key_);
  const std::uint64_t lengths[2] = {public_key.size(), signature.size()};
  hasher.update(ByteSpan(reinterpret_cast<const std::uint8_t*>(lengths), sizeof(lengths)));
  hasher.update(public_key);
  hasher.update(signature);
  hasher.update(message);
  return hasher.finish();
}

size_t SignatureMemo::slot_of(const Digest& digest) const {
  std::uint64_t index = 0;
  std::memcpy(&index, digest.data(), sizeof(index));
  return static_cast<size_t>(index % slots_);
}

bool SignatureMemo::contains(const Digest& digest) const {
  std::lock_guard lock(mutex_);
  if (table_.empty()) return false;
  return table_[slot_of(digest)] == digest;
}

void SignatureMemo::remember(const Digest& digest) {
  std::lock_guard lock(mutex_);
  if (table_.empty()) table_.resize(slots_);
  table_[slot_of(digest)] = digest;
}

SignatureMemo& process_signature_memo() {
  static SignatureMemo memo(kProcessSlots);
  return memo;
}

}  // namespace dedloc::crypto
