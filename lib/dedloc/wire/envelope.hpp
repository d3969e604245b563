// The envelope: how every dedloc message is framed on a ZeroMQ connection.
//
//   frame 0:        msgpack map  {"magic": "dedloc", "ver": 1, "type": u16, "rid": u64,
//                                  "from": bin(20) (optional), "nf": u32, "auth": 1 (optional), "body": map}
//   frames 1..nf:   raw payload frames (tensor parts), never re-encoded
//   frame nf+1:     with "auth": the authentication frame of a private run (wire/auth_frame.hpp)
//
// The header is decoded with the Limits; a wrong magic, a wrong version, a frame count that does not
// match, or any malformed byte is a Status, never a crash. docs/wire-protocol.md specifies this in prose.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/wire/limits.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/message_type.hpp"

namespace dedloc::wire {

inline constexpr std::string_view kMagic = "dedloc";
inline constexpr std::uint64_t kProtocolVersion = 1;

struct Envelope {
  MessageType type{};
  std::uint64_t request_id = 0;      // chosen by the requester, echoed in the reply
  crypto::PeerId sender;             // zero when the sender did not say
  std::uint32_t frame_count = 0;     // payload frames that follow the header
  bool authenticated = false;        // an authentication frame follows the payload frames
};

// Encodes the header frame for `envelope`; `body` is the message's fields as an encoded msgpack map
// (MapWriter::to_bytes()).
Bytes encode_header(const Envelope& envelope, ByteSpan body);

// A decoded header frame. Owns the msgpack objects the body reader points into.
class DecodedHeader {
 public:
  const Envelope& envelope() const { return envelope_; }
  // The message's fields, for a schema's decode().
  MapReader body() const { return body_; }

 private:
  friend Result<DecodedHeader> decode_header(ByteSpan bytes, const Limits& limits);
  DecodedHeader(Envelope envelope, std::shared_ptr<msgpack::object_handle> handle, MapReader body)
      : envelope_(envelope), handle_(std::move(handle)), body_(std::move(body)) {}
  Envelope envelope_;
  std::shared_ptr<msgpack::object_handle> handle_;
  MapReader body_;
};

// Decodes and validates a header frame. Errors: kTooLarge (over a limit), kVersionMismatch (magic or
// version), kMalformed (anything else).
Result<DecodedHeader> decode_header(ByteSpan bytes, const Limits& limits);
// The request id of a header that failed decode_header, when it is readable at all, so that a server can
// address its error reply to the request that caused it.
std::optional<std::uint64_t> peek_request_id(ByteSpan bytes, const Limits& limits);

}  // namespace dedloc::wire
