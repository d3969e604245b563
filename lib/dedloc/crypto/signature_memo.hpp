// Signatures already found valid, remembered so that checking one again costs a hash, not a verification.
//
// A peer reads the same signed records again and again: every trainer reads the run's progress key every
// few seconds and gets each record from every replica that answers, so an Ed25519 verification (tens of
// microseconds, more on a busy CPU) was a seventh of a trainer's CPU time in a 64-peer lab run
// (bench/lab/README.md). Hashing the triple costs well under a microsecond.
//
// Only triples that verified are remembered, each as a keyed BLAKE2b-256 digest of (public key, signature,
// message): a hit is exactly a triple that verified before, and a changed byte anywhere is a miss. The
// table is direct-mapped and fixed in size: a newer triple takes an older one's slot, so it never grows,
// and forgetting only costs a verification.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/crypto/hash.hpp"

namespace dedloc::crypto {

class SignatureMemo {
 public:
  using Digest = Hasher::Digest;

  explicit SignatureMemo(size_t slots);

  // The triple's digest under this memo's own random key (so that nobody can aim at its slots).
  Digest digest(ByteSpan public_key, ByteSpan message, ByteSpan signature) const;
  bool contains(const Digest& digest) const;
  void remember(const Digest& digest);

 private:
  size_t slot_of(const Digest& digest) const;

  std::array<std::uint8_t, 32> key_{};
  size_t slots_;
  mutable std::mutex mutex_;
  // Allocated at the first remember(): a process that verifies nothing pays nothing. An empty slot holds
  // zeros, which no keyed digest is in practice.
  std::vector<Digest> table_;
};

// The process's memo, which crypto::verify_signature consults.
SignatureMemo& process_signature_memo();

}  // namespace dedloc::crypto
