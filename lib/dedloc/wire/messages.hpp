// Every message schema dedloc speaks, in one place.
//
// Each schema is a struct with its MessageType, its name, and encode/decode functions whose string
// literals are the wire keys (pinned: renaming a member never changes the wire). Decoders skip unknown keys
// and return kMalformed naming the field on a missing or mistyped one. Large data (tensor parts) never goes
// in these maps: it travels in the envelope's raw payload frames; a schema says how many frames it carries.
// docs/wire-protocol.md lists every message with its keys; tests/unit/wire_golden_test.cpp pins the bytes.
#pragma once

#include <cstdint>
#include <string>

#include "dedloc/core/status.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/message_type.hpp"

namespace dedloc::wire {

// The answer to a request that failed: unknown type, malformed, refused, over a limit, ...
struct ErrorReply {
  static constexpr MessageType kType = MessageType::kErrorReply;
  static constexpr std::string_view kName = "ErrorReply";
  Code code = Code::kInternal;
  std::string message;

  void encode(MapWriter& out) const;
  static Result<ErrorReply> decode(MapReader in);
  Status to_status() const;  // the remote error as a local Status ("remote peer: ..." prefix)
};

// Liveness and compatibility check; also how a joining peer learns the other side's clock.
struct Ping {
  static constexpr MessageType kType = MessageType::kPing;
  static constexpr std::string_view kName = "Ping";
  double sent_unix_time = 0;  // seconds since the epoch, sender's wall clock

  void encode(MapWriter& out) const;
  static Result<Ping> decode(MapReader in);
};

struct Pong {
  static constexpr MessageType kType = MessageType::kPong;
  static constexpr std::string_view kName = "Pong";
  double ping_sent_unix_time = 0;  // echoed from the Ping: lets the pinger compute round-trip and skew
  double unix_time = 0;            // the answering peer's wall clock when it answered
  std::string software;            // "dedloc 0.1.0"

  void encode(MapWriter& out) const;
  static Result<Pong> decode(MapReader in);
};

// Echoes its payload frames back: round-trip latency and bandwidth between two peers.
struct Probe {
  static constexpr MessageType kType = MessageType::kProbe;
  static constexpr std::string_view kName = "Probe";
  std::uint64_t sequence = 0;
  bool echo_payload = true;  // false: reply without the frames (measures one direction only)

  void encode(MapWriter& out) const;
  static Result<Probe> decode(MapReader in);
};

struct ProbeReply {
  static constexpr MessageType kType = MessageType::kProbeReply;
  static constexpr std::string_view kName = "ProbeReply";
  std::uint64_t sequence = 0;
  std::uint64_t received_bytes = 0;  // payload bytes the server received with the Probe

  void encode(MapWriter& out) const;
  static Result<ProbeReply> decode(MapReader in);
};

// One part of a byte stream (exactly one payload frame). Parts of a stream may arrive in any order; the
// receiver acknowledges each, and the sender keeps at most `window` parts unacknowledged (flow control).
struct StreamPart {
  static constexpr MessageType kType = MessageType::kStreamPart;
  static constexpr std::string_view kName = "StreamPart";
  std::uint64_t stream_id = 0;
  std::uint64_t offset = 0;       // byte offset of this part in the stream
  std::uint64_t total_bytes = 0;  // size of the whole stream, the same in every part

  void encode(MapWriter& out) const;
  static Result<StreamPart> decode(MapReader in);
};

struct StreamAck {
  static constexpr MessageType kType = MessageType::kStreamAck;
  static constexpr std::string_view kName = "StreamAck";
  std::uint64_t stream_id = 0;
  std::uint64_t offset = 0;          // the part acknowledged
  std::uint64_t received_bytes = 0;  // bytes of this stream received so far

  void encode(MapWriter& out) const;
  static Result<StreamAck> decode(MapReader in);
};

}  // namespace dedloc::wire
