#include "dedloc/wire/auth_frame.hpp"

#include <algorithm>
#include <string_view>

#include "dedloc/wire/big_endian.hpp"

namespace dedloc::wire {

namespace {

constexpr std::string_view kMagic = "DLA1";
constexpr std::string_view kSignedTag = "dedloc-message-v1";

}  // namespace

Bytes encode_auth_frame(const AuthFrame& frame) {
  Bytes out(kMagic.begin(), kMagic.end());
  put_big_endian(out, static_cast<std::uint16_t>(frame.token.size()));
  out.insert(out.end(), frame.token.begin(), frame.token.end());
  put_big_endian(out, frame.time_ms);
  out.insert(out.end(), frame.nonce.begin(), frame.nonce.end());
  out.insert(out.end(), frame.signature.begin(), frame.signature.end());
  return out;
}

Result<AuthFrame> decode_auth_frame(ByteSpan bytes) {
  constexpr size_t kFixed = 4 + 2 + 8 + kNonceBytes + crypto::kSignatureSize;
  if (bytes.size() < kFixed || !std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) {
    return error(Code::kMalformed, "authentication frame: not one (too short or bad magic)");
  }
  const size_t token_size = (size_t{bytes[4]} << 8) | bytes[5];
  if (token_size > kMaxAuthTokenBytes || bytes.size() != kFixed + token_size) {
    return error(Code::kMalformed, "authentication frame: its token length does not match its size");
  }
  AuthFrame frame;
  size_t at = 6;
  frame.token.assign(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                     bytes.begin() + static_cast<std::ptrdiff_t>(at + token_size));
  at += token_size;
  for (int i = 0; i < 8; ++i) frame.time_ms = (frame.time_ms << 8) | bytes[at++];
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), kNonceBytes, frame.nonce.begin());
  at += kNonceBytes;
  std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(at), crypto::kSignatureSize, frame.signature.begin());
  return frame;
}

Bytes auth_signed_bytes(ByteSpan header, std::uint64_t time_ms, const std::array<std::uint8_t, kNonceBytes>& nonce) {
  Bytes out(kSignedTag.begin(), kSignedTag.end());
  put_big_endian(out, static_cast<std::uint64_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  put_big_endian(out, time_ms);
  out.insert(out.end(), nonce.begin(), nonce.end());
  return out;
}

}  // namespace dedloc::wire
