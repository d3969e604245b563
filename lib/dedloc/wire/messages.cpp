#include "dedloc/wire/messages.hpp"

namespace dedloc::wire {

// ---- ErrorReply ----
void ErrorReply::encode(MapWriter& out) const {
  out.put("code", static_cast<std::uint64_t>(code)).put("msg", message);
}

Result<ErrorReply> ErrorReply::decode(MapReader in) {
  ErrorReply m;
  std::uint64_t code = 0;
  in.get("code", code).get("msg", m.message);
  DEDLOC_RETURN_IF_ERROR(in.status());
  // Unknown codes from a newer peer still read as errors, never as success.
  m.code = code == 0 || code > 0xffff ? Code::kInternal : static_cast<Code>(code);
  return m;
}

Status ErrorReply::to_status() const { return {code, "remote peer: " + message}; }

// ---- Ping / Pong ----
void Ping::encode(MapWriter& out) const { out.put("t", sent_unix_time); }

Result<Ping> Ping::decode(MapReader in) {
  Ping m;
  in.get("t", m.sent_unix_time);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

void Pong::encode(MapWriter& out) const {
  out.put("pt", ping_sent_unix_time).put("t", unix_time).put("sw", software);
}

Result<Pong> Pong::decode(MapReader in) {
  Pong m;
  in.get("pt", m.ping_sent_unix_time).get("t", m.unix_time).get_optional("sw", m.software);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

// ---- Probe ----
void Probe::encode(MapWriter& out) const { out.put("seq", sequence).put("echo", echo_payload); }

Result<Probe> Probe::decode(MapReader in) {
  Probe m;
  in.get("seq", m.sequence).get_optional("echo", m.echo_payload);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

void ProbeReply::encode(MapWriter& out) const { out.put("seq", sequence).put("rx", received_bytes); }

Result<ProbeReply> ProbeReply::decode(MapReader in) {
  ProbeReply m;
  in.get("seq", m.sequence).get("rx", m.received_bytes);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

// ---- Streams ----
void StreamPart::encode(MapWriter& out) const {
  out.put("sid", stream_id).put("off", offset).put("total", total_bytes);
}

Result<StreamPart> StreamPart::decode(MapReader in) {
  StreamPart m;
  in.get("sid", m.stream_id).get("off", m.offset).get("total", m.total_bytes);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.offset > m.total_bytes) return error(Code::kMalformed, "StreamPart offset is past the stream's end");
  return m;
}

void StreamAck::encode(MapWriter& out) const {
  out.put("sid", stream_id).put("off", offset).put("rx", received_bytes);
}

Result<StreamAck> StreamAck::decode(MapReader in) {
  StreamAck m;
  in.get("sid", m.stream_id).get("off", m.offset).get("rx", m.received_bytes);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

}  // namespace dedloc::wire
