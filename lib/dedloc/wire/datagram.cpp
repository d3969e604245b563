#include "dedloc/wire/datagram.hpp"

#include <cstring>

#include <sodium.h>

#include "dedloc/wire/big_endian.hpp"

namespace dedloc::wire {

namespace {

constexpr std::uint8_t kMagic0 = 'D', kMagic1 = 'G', kVersion = 1, kSealed = 1;

// Reads from a span, failing (not crashing) past its end.
class Reader {
 public:
  explicit Reader(ByteSpan bytes) : bytes_(bytes) {}
  bool take(size_t n, ByteSpan& out) {
    if (bytes_.size() - at_ < n) return false;
    out = bytes_.subspan(at_, n);
    at_ += n;
    return true;
  }
  bool u8(std::uint8_t& v) {
    ByteSpan b;
    if (!take(1, b)) return false;
    v = b[0];
    return true;
  }
  template <class T>
  bool big_endian(T& v) {
    ByteSpan b;
    if (!take(sizeof(T), b)) return false;
    v = 0;
    for (auto byte : b) v = static_cast<T>((v << 8) | byte);
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  ByteSpan bytes_;
  size_t at_ = 0;
};

Status malformed(const std::string& what) { return error(Code::kMalformed, "datagram: " + what); }

}  // namespace

Bytes encode_datagram_body(const DatagramBody& body) {
  Bytes out;
  size_t size = 1 + 8 + 1 + kCookieBytes + 1;
  for (const auto& f : body.frames) size += 4 + f.size();
  out.reserve(size);
  out.push_back(static_cast<std::uint8_t>(body.kind));
  put_big_endian(out, body.request_id);
  out.push_back(body.cookie ? static_cast<std::uint8_t>(kCookieBytes) : 0);
  if (body.cookie) out.insert(out.end(), body.cookie->begin(), body.cookie->end());
  out.push_back(static_cast<std::uint8_t>(body.frames.size()));
  for (const auto& f : body.frames) {
    put_big_endian(out, static_cast<std::uint32_t>(f.size()));
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

Result<DatagramBody> decode_datagram_body(ByteSpan bytes, size_t max_frames) {
  Reader in(bytes);
  DatagramBody body;
  std::uint8_t kind = 0, cookie_bytes = 0, frames = 0;
  if (!in.u8(kind) || !in.big_endian(body.request_id) || !in.u8(cookie_bytes)) return malformed("truncated");
  if (kind < static_cast<std::uint8_t>(DatagramKind::kRequest) ||
      kind > static_cast<std::uint8_t>(DatagramKind::kUseStream)) {
    return malformed("unknown kind " + std::to_string(kind));
  }
  body.kind = static_cast<DatagramKind>(kind);
  if (cookie_bytes != 0) {
    ByteSpan cookie;
    if (cookie_bytes != kCookieBytes) return malformed("a cookie of " + std::to_string(cookie_bytes) + " bytes");
    if (!in.take(kCookieBytes, cookie)) return malformed("truncated cookie");
    body.cookie.emplace();
    std::memcpy(body.cookie->data(), cookie.data(), kCookieBytes);
  }
  if (!in.u8(frames)) return malformed("truncated");
  if (frames > max_frames) {
    return error(Code::kTooLarge,
                 "datagram: " + std::to_string(frames) + " frames, more than " + std::to_string(max_frames));
  }
  body.frames.reserve(frames);
  for (std::uint8_t i = 0; i < frames; ++i) {
    std::uint32_t length = 0;
    ByteSpan frame;
    if (!in.big_endian(length) || !in.take(length, frame)) return malformed("truncated frame");
    body.frames.emplace_back(frame.begin(), frame.end());
  }
  if (!in.done()) return malformed("bytes after the last frame");
  return body;
}

std::optional<SharedKey> datagram_shared_key(const crypto::PublicKey& their_public,
                                             const crypto::CurveKey& our_secret) {
  auto their_curve = crypto::curve_public_key(their_public);
  if (!their_curve) return std::nullopt;
  SharedKey shared{};
  // Fails for a low-order point (a key chosen to force a known shared secret).
  if (crypto_box_beforenm(shared.data(), their_curve->data(), our_secret.data()) != 0) return std::nullopt;
  return shared;
}

Bytes encode_datagram(ByteSpan body, const crypto::PublicKey* sender, const SharedKey* shared) {
  Bytes out(kDatagramPrefixBytes + (shared ? kSealOverheadBytes : 0) + body.size());
  out[0] = kMagic0;
  out[1] = kMagic1;
  out[2] = kVersion;
  out[3] = shared ? kSealed : 0;
  std::uint8_t* at = out.data() + kDatagramPrefixBytes;
  if (!shared) {
    if (!body.empty()) std::memcpy(at, body.data(), body.size());
    return out;
  }
  std::memcpy(at, sender->data(), crypto::kPublicKeySize);
  at += crypto::kPublicKeySize;
  std::uint8_t* nonce = at;
  randombytes_buf(nonce, kDatagramNonceBytes);
  crypto_box_easy_afternm(nonce + kDatagramNonceBytes, body.data(), body.size(), nonce, shared->data());
  return out;
}

Result<DatagramEnvelope> decode_datagram(ByteSpan bytes) {
  if (bytes.size() < kDatagramPrefixBytes) return malformed("shorter than its prefix");
  if (bytes[0] != kMagic0 || bytes[1] != kMagic1) return malformed("wrong magic");
  if (bytes[2] != kVersion) {
    return error(Code::kVersionMismatch,
                 "datagram version " + std::to_string(bytes[2]) + ", this peer speaks " + std::to_string(kVersion));
  }
  if ((bytes[3] & ~kSealed) != 0) return malformed("unknown flags");
  DatagramEnvelope envelope;
  ByteSpan rest = bytes.subspan(kDatagramPrefixBytes);
  if (bytes[3] & kSealed) {
    if (rest.size() < kSealOverheadBytes) return malformed("shorter than its seal");
    envelope.sender.emplace();
    std::memcpy(envelope.sender->data(), rest.data(), crypto::kPublicKeySize);
    rest = rest.subspan(crypto::kPublicKeySize);
  }
  envelope.sealed_or_body = rest;
  return envelope;
}

Result<Bytes> open_datagram(const DatagramEnvelope& envelope, const SharedKey& shared) {
  const ByteSpan sealed = envelope.sealed_or_body;
  if (!envelope.sender || sealed.size() < kDatagramNonceBytes + kDatagramTagBytes) return malformed("not sealed");
  const std::uint8_t* nonce = sealed.data();
  const std::uint8_t* box = nonce + kDatagramNonceBytes;
  const size_t box_bytes = sealed.size() - kDatagramNonceBytes;
  Bytes body(box_bytes - kDatagramTagBytes);
  if (crypto_box_open_easy_afternm(body.data(), box, box_bytes, nonce, shared.data()) != 0) {
    return error(Code::kUnauthorized, "datagram: the seal does not open (forged, altered, or not for us)");
  }
  return body;
}

}  // namespace dedloc::wire
