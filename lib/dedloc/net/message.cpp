#include "dedloc/net/message.hpp"

namespace dedloc::net {

void frame_message(const wire::Envelope& envelope, Outgoing&& out, std::vector<zmq::message_t>& parts) {
  wire::Envelope env = envelope;
  env.type = out.type;
  env.frame_count = static_cast<std::uint32_t>(out.frames.size());
  Bytes header = wire::encode_header(env, out.body);
  parts.emplace_back(header.data(), header.size());
  for (auto& f : out.frames) parts.push_back(std::move(f));
}

}  // namespace dedloc::net
