// Writes the seed corpus for envelope_target: one valid header per message type plus a few edge cases.
// Usage: fuzz_make_seeds tests/fuzz/corpus/envelope   (built with -DDEDLOC_FUZZ=ON)
#include <cstdio>
#include <fstream>
#include <string>

#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::wire;

namespace {

template <class Message>
Bytes header_of(const Message& m, std::uint32_t frames = 0, std::uint64_t rid = 1) {
  MapWriter body;
  m.encode(body);
  crypto::PeerId from(std::array<std::uint8_t, 20>{1, 2, 3});
  return encode_header({Message::kType, rid, from, frames}, body.to_bytes());
}

void write(const std::string& dir, const std::string& name, const Bytes& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                         static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  write(dir, "seed-error", header_of(ErrorReply{Code::kRefused, "group is full"}));
  write(dir, "seed-ping", header_of(Ping{1.7e9}));
  write(dir, "seed-pong", header_of(Pong{1.7e9, 1.7e9 + 0.01, "dedloc 0.1.0"}));
  write(dir, "seed-probe", header_of(Probe{3, true}, 2));
  write(dir, "seed-probe-reply", header_of(ProbeReply{3, 1024}, 2));
  write(dir, "seed-stream-part", header_of(StreamPart{9, 1 << 20, 1 << 28}, 1));
  write(dir, "seed-stream-ack", header_of(StreamAck{9, 1 << 20, 2 << 20}));
  write(dir, "seed-rid-max", header_of(Ping{0}, 0, UINT64_MAX));
  write(dir, "seed-empty-map", Bytes{0x80});
  write(dir, "seed-nil", Bytes{0xc0});
  return 0;
}
