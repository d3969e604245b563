// BLAKE2b hashing (libsodium), streaming: used for schema hashes and to check large transfers bit-exactly.
#pragma once

#include <array>
#include <string>

#include <sodium.h>

#include "dedloc/core/bytes.hpp"

namespace dedloc::crypto {

class Hasher {
 public:
  static constexpr size_t kSize = 32;
  using Digest = std::array<std::uint8_t, kSize>;
  Hasher();
  explicit Hasher(ByteSpan key);  // keyed BLAKE2b (a MAC): digests nobody without the key can predict
  void update(ByteSpan data);
  Digest finish();
  std::string finish_hex();

 private:
  crypto_generichash_state state_;
};

std::string blake2b_hex(ByteSpan data);

}  // namespace dedloc::crypto
