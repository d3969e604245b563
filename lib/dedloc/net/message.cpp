#include "dedloc/net/message.hpp"

namespace dedloc::net {

namespace {
ByteSpan span_of(const zmq::message_t& m) { return {m.data<std::uint8_t>(), m.size()}; }
}  // namespace

void frame_message(const wire::Envelope& envelope, Outgoing&& out, std::vector<zmq::message_t>& parts,
                   AccessControl* access) {
  wire::Envelope env = envelope;
  env.type = out.type;
  env.frame_count = static_cast<std::uint32_t>(out.frames.size());
  env.authenticated = access != nullptr;
  Bytes header = wire::encode_header(env, out.body);
  parts.emplace_back(header.data(), header.size());
  for (auto& f : out.frames) parts.push_back(std::move(f));
  if (access) {
    Bytes seal = access->seal(header);
    parts.emplace_back(seal.data(), seal.size());
  }
}

Status authenticate(AccessControl* access, const wire::DecodedHeader& header, std::vector<zmq::message_t>& parts,
                    bool unsealed_errors) {
  const auto& env = header.envelope();
  const size_t expected = 1 + env.frame_count + (env.authenticated ? 1 : 0);
  if (parts.size() != expected) {
    return error(Code::kMalformed, "header announces " + std::to_string(env.frame_count) + " payload frames" +
                                       (env.authenticated ? " and an authentication frame, " : ", ") +
                                       std::to_string(parts.size() - 1) + " arrived");
  }
  if (env.authenticated) {
    zmq::message_t seal = std::move(parts.back());
    parts.pop_back();
    if (access) return access->check(span_of(parts.front()), env.sender, span_of(seal));
    return Status::ok();
  }
  if (!access || (unsealed_errors && env.type == wire::MessageType::kErrorReply)) return Status::ok();
  return access->check(span_of(parts.front()), env.sender, std::nullopt);
}

}  // namespace dedloc::net
