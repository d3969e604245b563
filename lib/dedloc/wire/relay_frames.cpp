#include "dedloc/wire/relay_frames.hpp"

#include <algorithm>
#include <cstring>

#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/unpack.hpp"

namespace dedloc::wire {

namespace {

constexpr std::string_view kMagic = "DLR1";
constexpr std::string_view kAttachContext = "dedloc-relay-attach-v1";

Bytes attach_message(const crypto::PeerId& relay, std::uint64_t unix_ms) {
  Bytes message(kAttachContext.begin(), kAttachContext.end());
  message.insert(message.end(), relay.bytes().begin(), relay.bytes().end());
  for (int i = 0; i < 8; ++i) message.push_back(static_cast<std::uint8_t>(unix_ms >> (8 * i)));
  return message;
}

bool known_tag(std::uint8_t tag) {
  switch (static_cast<RelayTag>(tag)) {
    case RelayTag::kForward: case RelayTag::kRequest: case RelayTag::kReply:
    case RelayTag::kAttach: case RelayTag::kAttachAnswer: case RelayTag::kHeartbeat:
      return true;
  }
  return false;
}

}  // namespace

Bytes encode_relay_frame(RelayTag tag, ByteSpan id) {
  Bytes frame(kMagic.begin(), kMagic.end());
  frame.push_back(static_cast<std::uint8_t>(tag));
  frame.insert(frame.end(), id.begin(), id.end());
  return frame;
}

Result<std::optional<RelayFrame>> decode_relay_frame(ByteSpan frame) {
  if (frame.size() < kMagic.size() || std::memcmp(frame.data(), kMagic.data(), kMagic.size()) != 0) {
    return std::optional<RelayFrame>{};
  }
  if (frame.size() < kMagic.size() + 1) return error(Code::kMalformed, "relay frame without a tag");
  std::uint8_t tag = frame[kMagic.size()];
  if (!known_tag(tag)) return error(Code::kMalformed, "relay frame with an unknown tag");
  ByteSpan id = frame.subspan(kMagic.size() + 1);
  if (id.size() > kMaxRelayIdBytes) return error(Code::kMalformed, "relay frame with an over-long id");
  RelayFrame out{static_cast<RelayTag>(tag), Bytes(id.begin(), id.end())};
  if (out.tag == RelayTag::kForward && id.size() != crypto::PeerId::kSize) {
    return error(Code::kMalformed, "relay forward frame without a 20-byte peer id");
  }
  return std::optional<RelayFrame>(std::move(out));
}

Bytes encode_attach_proof(const crypto::Identity& identity, const crypto::PeerId& relay, std::uint64_t unix_ms,
                          ByteSpan access_token) {
  auto signature = identity.sign(attach_message(relay, unix_ms));
  MapWriter out;
  out.put_binary("key", ByteSpan(identity.public_key().data(), identity.public_key().size()))
      .put("t", unix_ms)
      .put_binary("sig", ByteSpan(signature.data(), signature.size()));
  if (!access_token.empty()) out.put_binary("tok", access_token);
  return out.to_bytes();
}


Result<AttachProof> verify_attach_proof(ByteSpan proof, const crypto::PeerId& relay, std::uint64_t now_ms,
                                        std::uint64_t window_ms) {
  auto object = unpack_bounded(proof, Limits{}, "relay attach");
  if (!object) return object.status();
  auto reader = MapReader::of((*object)->get(), "relay attach");
  if (!reader) return reader.status();
  Bytes key, signature, token;
  std::uint64_t t = 0;
  reader->get("key", key).get("t", t).get("sig", signature).get_optional("tok", token);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  if (key.size() != crypto::kPublicKeySize || signature.size() != crypto::kSignatureSize) {
    return error(Code::kMalformed, "relay attach: a key or signature of the wrong size");
  }
  if ((t > now_ms ? t - now_ms : now_ms - t) > window_ms) {
    return error(Code::kUnauthorized, "relay attach: its time is more than " + std::to_string(window_ms / 1000) +
                                          " s from the relay's clock (replayed, or a clock far off)");
  }
  if (!crypto::verify_signature(key, attach_message(relay, t), signature)) {
    return error(Code::kUnauthorized, "relay attach: the signature does not verify (for another relay?)");
  }
  return AttachProof{crypto::PeerId::from_public_key(key), std::move(token)};
}

Bytes encode_attach_answer(const Status& status) {
  MapWriter out;
  out.put("code", static_cast<std::uint64_t>(status.code())).put("why", status.message());
  return out.to_bytes();
}

Status decode_attach_answer(ByteSpan answer) {
  auto object = unpack_bounded(answer, Limits{}, "relay attach answer");
  if (!object) return object.status();
  auto reader = MapReader::of((*object)->get(), "relay attach answer");
  if (!reader) return reader.status();
  std::uint64_t code = 0;
  std::string why;
  reader->get("code", code).get("why", why);
  DEDLOC_RETURN_IF_ERROR(reader->status());
  if (code == 0) return Status::ok();
  if (code > static_cast<std::uint64_t>(Code::kUnauthorized)) return error(Code::kMalformed, "relay attach answer: unknown code");
  return error(static_cast<Code>(code), "relay: " + why);
}

}  // namespace dedloc::wire
