#include "dedloc/wire/envelope.hpp"

#include "dedloc/wire/unpack.hpp"

#include <limits>

namespace dedloc::wire {

Bytes encode_header(const Envelope& envelope, ByteSpan body) {
  MapWriter header;
  header.put("magic", kMagic)
      .put("ver", kProtocolVersion)
      .put("type", static_cast<std::uint64_t>(envelope.type))
      .put("rid", envelope.request_id);
  if (!envelope.sender.is_zero()) header.put_binary("from", envelope.sender.span());
  header.put("nf", static_cast<std::uint64_t>(envelope.frame_count));
  if (envelope.authenticated) header.put("auth", std::uint64_t{1});
  header.put_encoded("body", body);
  return header.to_bytes();
}


Result<DecodedHeader> decode_header(ByteSpan bytes, const Limits& limits) {
  auto handle = unpack_bounded(bytes, limits, "header");
  if (!handle) return handle.status();
  auto header = MapReader::of((*handle)->get(), "header");
  if (!header) return header.status();

  std::string magic;
  std::uint64_t version = 0;
  header->get("magic", magic).get("ver", version);
  if (!header->status().is_ok() || magic != kMagic) {
    return error(Code::kVersionMismatch, "not a dedloc message (bad magic)");
  }
  if (version != kProtocolVersion) {
    return error(Code::kVersionMismatch, "protocol version " + std::to_string(version) + " is not supported (this peer speaks " +
                                             std::to_string(kProtocolVersion) + ")");
  }

  Envelope env;
  std::uint64_t type = 0, frames = 0, authenticated = 0;
  Bytes sender;
  header->get("type", type).get("rid", env.request_id).get("nf", frames).get_optional("from", sender);
  header->get_optional("auth", authenticated);
  DEDLOC_RETURN_IF_ERROR(header->status());
  if (type == 0 || type > std::numeric_limits<std::uint16_t>::max()) {
    return error(Code::kMalformed, "message type " + std::to_string(type) + " is out of range");
  }
  if (frames > limits.max_frames) {
    return error(Code::kTooLarge, "header announces " + std::to_string(frames) + " payload frames, over the limit of " +
                                      std::to_string(limits.max_frames));
  }
  if (!sender.empty()) {
    auto id = crypto::PeerId::from_bytes(sender);
    if (!id) return error(Code::kMalformed, "field 'from' of header must be 20 bytes");
    env.sender = *id;
  }
  env.type = static_cast<MessageType>(type);
  env.frame_count = static_cast<std::uint32_t>(frames);
  env.authenticated = authenticated != 0;

  auto body = header->nested("body");
  if (!body) return body.status();
  return DecodedHeader(env, std::move(*handle), std::move(*body));
}

std::optional<std::uint64_t> peek_request_id(ByteSpan bytes, const Limits& limits) {
  auto handle = unpack_bounded(bytes, limits, "header");
  if (!handle) return std::nullopt;
  auto header = MapReader::of((*handle)->get(), "header");
  if (!header) return std::nullopt;
  std::uint64_t rid = 0;
  header->get("rid", rid);
  if (!header->status().is_ok()) return std::nullopt;
  return rid;
}

}  // namespace dedloc::wire
