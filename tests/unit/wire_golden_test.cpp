// Golden bytes: the exact encoding of every message. A failure here means the wire changed; that is only
// allowed as an append-only, versioned change (see docs/wire-protocol.md), never by accident.
#include <catch2/catch.hpp>

#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::wire;

namespace {

// The whole header frame of `message` sent as request 7 by peer 0x0101...01.
template <class Message>
std::string golden(const Message& message, std::uint32_t frames = 0) {
  MapWriter body;
  message.encode(body);
  std::array<std::uint8_t, 20> id{};
  id.fill(1);
  Bytes bytes = encode_header({Message::kType, 7, crypto::PeerId(id), frames}, body.to_bytes());
  // Decoding the golden bytes must give the message back.
  auto decoded = decode_header(bytes, Limits{});
  REQUIRE(decoded.is_ok());
  REQUIRE(decoded->envelope().type == Message::kType);
  REQUIRE(Message::decode(decoded->body()).is_ok());
  return to_hex(bytes);
}

// The envelope of every golden message, around its type number and frame count:
//   87                                  map of 7 entries
//   a5 "magic" a6 "dedloc"  a3 "ver" 01  a4 "type" <type>
//   a3 "rid" 07  a4 "from" c414 0101..01 (bin 20)  a2 "nf" <frames>  a4 "body" <body map>
std::string envelope(const std::string& type, const std::string& frames, const std::string& body) {
  return "87a56d61676963a66465646c6f63a376657201a474797065" + type +
         "a372696407a466726f6dc4140101010101010101010101010101010101010101a26e66" + frames + "a4626f6479" + body;
}

}  // namespace

TEST_CASE("Golden bytes of every message", "[unit][wire][golden]") {
  // {"code": 8, "msg": "full"}
  CHECK(golden(ErrorReply{Code::kRefused, "full"}) == envelope("01", "00", "82a4636f646508a36d7367a466756c6c"));
  // {"t": 1.5}
  CHECK(golden(Ping{1.5}) == envelope("02", "00", "81a174cb3ff8000000000000"));
  // {"pt": 1.5, "t": 2.25, "sw": "dedloc 0.1.0"}
  CHECK(golden(Pong{1.5, 2.25, "dedloc 0.1.0"}) ==
        envelope("03", "00", "83a27074cb3ff8000000000000a174cb4002000000000000a27377ac6465646c6f6320302e312e30"));
  // {"seq": 3, "echo": false}, one payload frame
  CHECK(golden(Probe{3, false}, 1) == envelope("04", "01", "82a373657103a46563686fc2"));
  // {"seq": 3, "rx": 4096}
  CHECK(golden(ProbeReply{3, 4096}) == envelope("05", "00", "82a373657103a27278cd1000"));
  // {"sid": 9, "off": 1024, "total": 4096}, one payload frame
  CHECK(golden(StreamPart{9, 1024, 4096}, 1) == envelope("06", "01", "83a373696409a36f6666cd0400a5746f74616ccd1000"));
  // {"sid": 9, "off": 1024, "rx": 2048}
  CHECK(golden(StreamAck{9, 1024, 2048}) == envelope("07", "00", "83a373696409a36f6666cd0400a27278cd0800"));
}
