#include "dedloc/crypto/hash.hpp"

#include "dedloc/crypto/identity.hpp"

namespace dedloc::crypto {

Hasher::Hasher() {
  ensure_sodium_initialized();
  crypto_generichash_init(&state_, nullptr, 0, kSize);
}

void Hasher::update(ByteSpan data) { crypto_generichash_update(&state_, data.data(), data.size()); }

std::array<std::uint8_t, Hasher::kSize> Hasher::finish() {
  std::array<std::uint8_t, kSize> out{};
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
