#include "dedloc/crypto/access_token.hpp"

#include <algorithm>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/files.hpp"

namespace dedloc::crypto {

namespace {

constexpr std::string_view kMagic = "DLT1";
constexpr std::string_view kTextPrefix = "dedloc-token-v1:";
constexpr size_t kFixedBytes = 4 + kPublicKeySize + kPublicKeySize + 8 + 1;  // before the name

// The signed part: every field before the signature, in the binary layout.
Bytes signed_part(const AccessToken& t) {
  Bytes out(kMagic.begin(), kMagic.end());
  out.insert(out.end(), t.authority.begin(), t.authority.end());
  out.insert(out.end(), t.peer.begin(), t.peer.end());
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(t.expires >> shift));
  out.push_back(static_cast<std::uint8_t>(t.name.size()));
  out.insert(out.end(), t.name.begin(), t.name.end());
  return out;
}

}  // namespace

Result<AccessToken> AccessToken::issue(const Identity& authority, const PublicKey& peer, std::string name,
                                       std::uint64_t expires) {
  if (name.size() > kMaxTokenName) {
    return error(Code::kInvalidArgument, "a token's name is at most " + std::to_string(kMaxTokenName) + " bytes");
  }
  AccessToken token;
  token.authority = authority.public_key();
  token.peer = peer;
  token.expires = expires;
  token.name = std::move(name);
  token.signature = authority.sign(signed_part(token));
  return token;
}

Bytes AccessToken::encode() const {
  Bytes out = signed_part(*this);
  out.insert(out.end(), signature.begin(), signature.end());
  return out;
}

Result<AccessToken> AccessToken::decode(ByteSpan bytes) {
  if (bytes.size() < kFixedBytes + kSignatureSize) {
    return error(Code::kMalformed, "access token: " + std::to_string(bytes.size()) + " bytes is too short");
  }
  if (!std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) {
    return error(Code::kMalformed, "access token: not a dedloc token (bad magic)");
  }
  AccessToken token;
  size_t at = kMagic.size();
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), kPublicKeySize, token.authority.begin());
  at += kPublicKeySize;
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), kPublicKeySize, token.peer.begin());
  at += kPublicKeySize;
  for (int i = 0; i < 8; ++i) token.expires = (token.expires << 8) | bytes[at++];
  const size_t name_size = bytes[at++];
  if (name_size > kMaxTokenName || bytes.size() != kFixedBytes + name_size + kSignatureSize) {
    return error(Code::kMalformed, "access token: its name length does not match its size");
  }
  token.name.assign(reinterpret_cast<const char*>(bytes.data() + at), name_size);
  at += name_size;
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), kSignatureSize, token.signature.begin());
  return token;
}

std::string AccessToken::to_text() const { return std::string(kTextPrefix) + to_hex(encode()); }

Result<AccessToken> AccessToken::from_text(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  if (!text.starts_with(kTextPrefix)) {
    return error(Code::kMalformed, "not a dedloc access token (it starts with '" + std::string(kTextPrefix) + "')");
  }
  auto bytes = from_hex(text.substr(kTextPrefix.size()));
  if (!bytes) return error(Code::kMalformed, "access token: not hex after '" + std::string(kTextPrefix) + "'");
  return decode(*bytes);
}

Result<AccessToken> AccessToken::load(const std::string& path) {
  auto text = read_file(path, 4096);
  if (!text) return text.status().with_context("token file " + path);
  auto token = from_text(*text);
  if (!token) return token.status().with_context("token file " + path);
  return token;
}

Status AccessToken::save(const std::string& path) const {
  return write_file_atomically(path, to_text() + "\n", 0600);
}

Status AccessToken::verify(const PublicKey& trusted, double now) const {
  if (authority != trusted) {
    return error(Code::kUnauthorized, "token of '" + name + "' was signed by authority " + to_hex(authority) +
                                          ", not this run's authority " + to_hex(trusted));
  }
  Bytes message = signed_part(*this);
  if (!verify_signature(authority, message, signature)) {
    return error(Code::kUnauthorized, "token of '" + name + "' has a forged signature");
  }
  if (now >= static_cast<double>(expires)) {
    return error(Code::kUnauthorized, "token of '" + name + "' expired at " + format_utc(static_cast<double>(expires)));
  }
  return Status::ok();
}

PeerId AccessToken::peer_id() const { return PeerId::from_public_key(peer); }

}  // namespace dedloc::crypto
