// Golden bytes: the exact encoding of every message. A failure here means the wire changed; that is only
// allowed as an append-only, versioned change (see docs/wire-protocol.md), never by accident.
#include <catch2/catch.hpp>

#include "dedloc/wire/dht_messages.hpp"
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
  auto message_back = Message::decode(decoded->body());
  REQUIRE(message_back.is_ok());
  // ...and what it gives back encodes to the same bytes.
  MapWriter again;
  message_back->encode(again);
  REQUIRE(to_hex(again.to_bytes()) == to_hex(body.to_bytes()));
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

namespace {

crypto::PeerId filled_id(std::uint8_t byte) {
  std::array<std::uint8_t, 20> id{};
  id.fill(byte);
  return crypto::PeerId(id);
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

const ContactInfo kContact2{filled_id(2), "tcp://10.0.0.2:7000", 0};
const ContactInfo kContact3{filled_id(3), "tcp://10.0.0.3:7000", 0};

}  // namespace

TEST_CASE("Golden bytes of every DHT message", "[unit][wire][golden]") {
  // Pieces that recur: 20-byte ids (bin 20) and 19-character endpoints (str 19).
  //   c414 0202..02 / c414 0303..03      ids 0x02.. and 0x03..
  //   b3 "tcp://10.0.0.N:7000"           endpoints
  //   cb 41d954fc40200000                1700000000.5 (float 64)

  // {"target": bin(0xaa x 20), "ep": "tcp://10.0.0.1:7000"}
  CHECK(golden(DhtFindNode{filled_id(0xaa), "tcp://10.0.0.1:7000"}) ==
        envelope("64", "00",
                 "82a6746172676574c414aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                 "a26570b37463703a2f2f31302e302e302e313a37303030"));
  // {"ids": [id2, id3], "eps": [ep2, ep3]}
  CHECK(golden(DhtNodes{{kContact2, kContact3}}) ==
        envelope("65", "00",
                 "82a369647392c4140202020202020202020202020202020202020202c4140303030303030303030303030303030303030303"
                 "a365707392b37463703a2f2f31302e302e302e323a37303030b37463703a2f2f31302e302e302e333a37303030"));
  // {"key": bin(0xbb x 20), "ep": ""}: a client-mode node
  CHECK(golden(DhtFindValue{filled_id(0xbb), ""}) ==
        envelope("66", "00", "82a36b6579c414bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbba26570a0"));
  // A plain value: {"v": bin "v1", "e": 1700000000.5, "s": bin 5152, "ids": [id2], "eps": [ep2]}
  CHECK(golden(DhtValue{{RecordEntry{std::nullopt, bytes("v1"), 1700000000.5, {0x51, 0x52}}}, {kContact2}}) ==
        envelope("67", "00",
                 "85a176c4027631a165cb41d954fc40200000a173c4025152"
                 "a369647391c4140202020202020202020202020202020202020202"
                 "a365707391b37463703a2f2f31302e302e302e323a37303030"));
  // A dictionary: {"sk": [bin "a", bin "b"], "sv": [bin "x", bin "y"], "se": [1700000000.5, 1700000001.25],
  //                "ss": [bin "", bin 5a], "ids": [], "eps": []}
  CHECK(golden(DhtValue{{RecordEntry{bytes("a"), bytes("x"), 1700000000.5, {}},
                         RecordEntry{bytes("b"), bytes("y"), 1700000001.25, {0x5a}}},
                        {}}) ==
        envelope("67", "00",
                 "86a2736b92c40161c40162a2737692c40178c40179a2736592cb41d954fc40200000cb41d954fc40500000"
                 "a2737392c400c4015aa369647390a365707390"));
  // Nothing live here, and no contacts: {"ids": [], "eps": []}
  CHECK(golden(DhtValue{}) == envelope("67", "00", "82a369647390a365707390"));
  // {"name": "run1_progress", "sk": bin "peer-a", "v": bin "p", "e": 1700000000.5, "s": bin 51,
  //  "ep": "tcp://10.0.0.1:7000"}
  CHECK(golden(DhtStore{"run1_progress", RecordEntry{bytes("peer-a"), bytes("p"), 1700000000.5, {0x51}},
                        "tcp://10.0.0.1:7000"}) ==
        envelope("68", "00",
                 "86a46e616d65ad72756e315f70726f6772657373a2736bc406706565722d61a176c40170a165cb41d954fc40200000"
                 "a173c40151a26570b37463703a2f2f31302e302e302e313a37303030"));
  // {"ids": [id2, id3], "eps": [ep2, ep3]}: the replier's contacts nearest to the key
  CHECK(golden(DhtStored{{kContact2, kContact3}}) ==
        envelope("69", "00",
                 "82a369647392c4140202020202020202020202020202020202020202c4140303030303030303030303030303030303030303"
                 "a365707392b37463703a2f2f31302e302e302e323a37303030b37463703a2f2f31302e302e302e333a37303030"));
  // {"max": 1000}
  CHECK(golden(DhtListPeers{1000}) == envelope("6a", "00", "81a36d6178cd03e8"));
  // {"self": "tcp://10.0.0.1:7000", "keys": 12, "ids": [id2], "eps": [ep2], "seen": [1700000000.5]}
  CHECK(golden(DhtPeerList{"tcp://10.0.0.1:7000", {{filled_id(2), "tcp://10.0.0.2:7000", 1700000000.5}}, 12}) ==
        envelope("6b", "00",
                 "85a473656c66b37463703a2f2f31302e302e302e313a37303030a46b6579730c"
                 "a369647391c4140202020202020202020202020202020202020202"
                 "a365707391b37463703a2f2f31302e302e302e323a37303030"
                 "a47365656e91cb41d954fc40200000"));
  // {"ep": "tcp://10.0.0.1:7000"}
  CHECK(golden(DhtCheckReachable{"tcp://10.0.0.1:7000"}) ==
        envelope("6c", "00", "81a26570b37463703a2f2f31302e302e302e313a37303030"));
  // {"ok": false, "why": "no answer within 2000 ms"}
  CHECK(golden(DhtReachability{false, "no answer within 2000 ms"}) ==
        envelope("6d", "00", "82a26f6bc2a3776879b86e6f20616e737765722077697468696e2032303030206d73"));
}

TEST_CASE("DHT messages decode to the fields they were encoded from", "[unit][wire][golden]") {
  auto round_trip = [](const auto& message) {
    using Message = std::decay_t<decltype(message)>;
    MapWriter body;
    message.encode(body);
    Bytes bytes = encode_header({Message::kType, 7, filled_id(1), 0}, body.to_bytes());
    auto decoded = decode_header(bytes, Limits{});
    REQUIRE(decoded.is_ok());
    auto back = Message::decode(decoded->body());
    REQUIRE(back.is_ok());
    return std::move(back).value();
  };
  RecordEntry plain{std::nullopt, bytes("v1"), 1700000000.5, Bytes(64, 0x51)};
  RecordEntry owned{bytes("[owner:00]"), bytes("x"), 1700000000, Bytes(64, 0x5a)};  // integral expiration too
  RecordEntry open{bytes("b"), Bytes{}, 1700000001.25, {}};

  auto find_node = round_trip(DhtFindNode{filled_id(0xaa), "tcp://10.0.0.1:7000"});
  CHECK(find_node.target == filled_id(0xaa));
  CHECK(find_node.sender_endpoint == "tcp://10.0.0.1:7000");
  CHECK(round_trip(DhtNodes{{kContact2, kContact3}}).nearest == std::vector<ContactInfo>{kContact2, kContact3});
  auto find_value = round_trip(DhtFindValue{filled_id(0xbb), ""});
  CHECK(find_value.key == filled_id(0xbb));
  CHECK(find_value.sender_endpoint.empty());
  auto value = round_trip(DhtValue{{plain}, {kContact3}});
  CHECK(value.entries == std::vector<RecordEntry>{plain});
  CHECK(value.nearest == std::vector<ContactInfo>{kContact3});
  auto dictionary = round_trip(DhtValue{{owned, open}, {kContact2, kContact3}});
  CHECK(dictionary.entries == std::vector<RecordEntry>{owned, open});
  CHECK(dictionary.nearest == std::vector<ContactInfo>{kContact2, kContact3});
  auto nothing = round_trip(DhtValue{});
  CHECK(nothing.entries.empty());
  CHECK(nothing.nearest.empty());
  for (const RecordEntry& entry : {plain, owned, open}) {
    auto store = round_trip(DhtStore{"run1_progress", entry, "tcp://10.0.0.1:7000"});
    CHECK(store.key_name == "run1_progress");
    CHECK(store.entry == entry);
    CHECK(store.sender_endpoint == "tcp://10.0.0.1:7000");
  }
  CHECK(round_trip(DhtStored{{kContact3, kContact2}}).nearest == std::vector<ContactInfo>{kContact3, kContact2});
  CHECK(round_trip(DhtListPeers{17}).max_contacts == 17);
  ContactInfo seen{filled_id(4), "tcp://10.0.0.4:7000", 1700000000.5};
  auto peers = round_trip(DhtPeerList{"tcp://10.0.0.1:7000", {seen, kContact2}, 12});
  CHECK(peers.endpoint == "tcp://10.0.0.1:7000");
  CHECK(peers.contacts == std::vector<ContactInfo>{seen, kContact2});
  CHECK(peers.stored_keys == 12);
  CHECK(round_trip(DhtCheckReachable{"tcp://10.0.0.1:7000"}).endpoint == "tcp://10.0.0.1:7000");
  auto reachable = round_trip(DhtReachability{true, ""});
  CHECK(reachable.reachable);
  CHECK(reachable.detail.empty());
  auto unreachable = round_trip(DhtReachability{false, "no answer within 2000 ms"});
  CHECK_FALSE(unreachable.reachable);
  CHECK(unreachable.detail == "no answer within 2000 ms");
}
