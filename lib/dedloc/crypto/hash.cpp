#include "dedloc/crypto/hash.hpp"

#include "dedloc/crypto/identity.hpp"

namespace dedloc::crypto {

Hasher::Hasher() : Hasher(ByteSpan()) {}

Hasher::Hasher(ByteSpan key) {
  ensure_sodium_initialized();
  crypto_generichash_init(&state_, key.empty() ? nullptr : key.data(), key.size(), kSize);
}

void Hasher::update(ByteSpan data) { crypto_generichash_update(&state_, data.data(), data.size()); }

Hasher::Digest Hasher::finish() {
  Digest out{};
  crypto_generichash_final(&state_, out.data(), out.size());
  return out;
}

std::string Hasher::finish_hex() {
  auto digest = finish();
  return to_hex(digest);
}

std::string blake2b_hex(ByteSpan data) {
  Hasher h;
  h.update(data);
  return h.finish_hex();
}

}  // namespace dedloc::crypto
