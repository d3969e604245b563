// Messages as the net layer moves them: a typed header plus raw payload frames (zero-copy zmq messages).
#pragma once

#include <vector>

#include <zmq.hpp>

#include "dedloc/core/status.hpp"
#include "dedloc/net/access_control.hpp"
#include "dedloc/wire/envelope.hpp"

namespace dedloc::net {

// A payload frame's bytes, for a decoder.
inline ByteSpan bytes_of(const zmq::message_t& frame) {
  return {static_cast<const std::uint8_t*>(frame.data()), frame.size()};
}

// A message to send. The envelope (request id, sender) is filled in by the Client or Server.
struct Outgoing {
  wire::MessageType type{};
  Bytes body;                          // the schema's fields, an encoded msgpack map
  std::vector<zmq::message_t> frames;  // payload frames, sent as they are

  template <class Message>
  static Outgoing of(const Message& message, std::vector<zmq::message_t> frames = {}) {
    wire::MapWriter writer;
    message.encode(writer);
    return {Message::kType, writer.to_bytes(), std::move(frames)};
  }
};

// A message received: its decoded header and its payload frames.
struct Incoming {
  wire::DecodedHeader header;
  std::vector<zmq::message_t> frames;

  const wire::Envelope& envelope() const { return header.envelope(); }
  wire::MessageType type() const { return envelope().type; }

  // Decodes the body as `Message`; kMalformed if the type or any field is wrong.
  template <class Message>
  Result<Message> decode() const {
    if (type() != Message::kType) {
      return error(Code::kMalformed, "expected " + std::string(Message::kName) + ", got " +
                                         std::string(wire::message_type_name(type())));
    }
    auto message = Message::decode(header.body());
    if (!message) return message.status();
    return message;
  }

  size_t payload_bytes() const {
    size_t n = 0;
    for (const auto& f : frames) n += f.size();
    return n;
  }
};

// Encodes `out`'s header with `envelope` fields and appends it plus the payload frames to `parts`, and,
// with `access` (a private run), the authentication frame that seals it.
void frame_message(const wire::Envelope& envelope, Outgoing&& out, std::vector<zmq::message_t>& parts,
                   AccessControl* access = nullptr);

// For a received message whose `parts` are [header, payload frames..., authentication frame if the header
// says so]: checks the frame count, then the authentication against `access` (null: an open run, where an
// authentication frame is dropped unchecked), and removes the authentication frame. `unsealed_errors`: an
// ErrorReply without authentication is accepted (a client reading replies; see access_control.hpp).
// kMalformed (frame count), kUnauthorized (the reason).
Status authenticate(AccessControl* access, const wire::DecodedHeader& header, std::vector<zmq::message_t>& parts,
                    bool unsealed_errors);

}  // namespace dedloc::net
