#include "dedloc/dht/record.hpp"

#include <bit>
#include <cstring>

#include <sodium.h>

namespace dedloc::dht {

namespace {

constexpr std::string_view kMarkerOpen = wire::kOwnerMarkerOpen;
constexpr std::string_view kSigningDomain = "dedloc-dht-record-v1";

void append_length_prefixed(Bytes& out, ByteSpan data) {
  std::uint64_t n = data.size();
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), data.begin(), data.end());
}

}  // namespace

PeerId key_id(std::string_view key_name) {
  std::array<std::uint8_t, PeerId::kSize> out{};
  crypto_generichash(out.data(), out.size(), reinterpret_cast<const unsigned char*>(key_name.data()), key_name.size(),
                     nullptr, 0);
  return PeerId(out);
}

Result<std::optional<crypto::PublicKey>> find_owner(ByteSpan text) {
  std::string_view view(reinterpret_cast<const char*>(text.data()), text.size());
  std::optional<crypto::PublicKey> owner;
  for (size_t at = view.find(kMarkerOpen); at != std::string_view::npos; at = view.find(kMarkerOpen, at + 1)) {
    if (owner) return error(Code::kMalformed, "names more than one owner");
    size_t start = at + kMarkerOpen.size();
    size_t close = view.find(']', start);
    if (close == std::string_view::npos) return error(Code::kMalformed, "has an unterminated owner marker");
    auto key = from_hex(view.substr(start, close - start));
    if (!key || key->size() != crypto::kPublicKeySize) {
      return error(Code::kMalformed, "has an owner marker that is not 64 hex digits");
    }
    owner.emplace();
    std::memcpy(owner->data(), key->data(), owner->size());
  }
  return owner;
}

std::optional<crypto::PeerId> owner_peer_id(ByteSpan text) {
  auto owner = find_owner(text);
  if (!owner || !owner->has_value()) return std::nullopt;
  return crypto::PeerId::from_public_key(ByteSpan((*owner)->data(), (*owner)->size()));
}

Result<std::optional<crypto::PublicKey>> entry_owner(std::string_view key_name, const std::optional<Bytes>& subkey) {
  auto by_key = find_owner(as_bytes(key_name));
  if (!by_key) return by_key.status().with_context("the key name");
  if (!subkey) return by_key;
  auto by_subkey = find_owner(*subkey);
  if (!by_subkey) return by_subkey.status().with_context("the subkey");
  if (*by_key && *by_subkey && **by_key != **by_subkey) {
    return error(Code::kMalformed, "the key name and the subkey name different owners");
  }
  return *by_subkey ? by_subkey : by_key;
}

Bytes signing_payload(const PeerId& key, const std::optional<Bytes>& subkey, ByteSpan value, double expiration) {
  Bytes out(kSigningDomain.begin(), kSigningDomain.end());
  out.insert(out.end(), key.span().begin(), key.span().end());
  out.push_back(subkey ? 1 : 0);
  if (subkey) append_length_prefixed(out, *subkey);
  append_length_prefixed(out, value);
  auto bits = std::bit_cast<std::uint64_t>(expiration);
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
  return out;
}

Status sign_entry(const crypto::Identity& identity, std::string_view key_name, RecordEntry& entry) {
  auto owner = entry_owner(key_name, entry.subkey);
  if (!owner) return owner.status();
  entry.signature.clear();
  if (!*owner) return {};
  if (**owner != identity.public_key()) {
    return error(Code::kUnauthorized, "the entry is owned by another key; this peer cannot sign it");
  }
  auto signature = identity.sign(signing_payload(key_id(key_name), entry.subkey, entry.value, entry.expiration));
  entry.signature.assign(signature.begin(), signature.end());
  return {};
}

Status check_owner_signature(std::string_view key_name, const RecordEntry& entry) {
  auto owner = entry_owner(key_name, entry.subkey);
  if (!owner) return owner.status();
  if (!*owner) return {};
  if (entry.signature.empty()) return error(Code::kUnauthorized, "an owned entry carries no signature");
  const auto& key = **owner;
  if (!crypto::verify_signature({key.data(), key.size()},
                                signing_payload(key_id(key_name), entry.subkey, entry.value, entry.expiration),
                                entry.signature)) {
    return error(Code::kUnauthorized, "the owner's signature does not match the entry");
  }
  return {};
}

}  // namespace dedloc::dht
