// Golden bytes: the exact encoding of every message. A failure here means the wire changed; that is only
// allowed as an append-only, versioned change (see docs/wire-protocol.md), never by accident.
#include <catch2/catch.hpp>

#include <functional>

#include "dedloc/wire/avg_messages.hpp"
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
  CHECK(nothing.instance == 0);
  // Incremental reads: the reader's cursor, and the replica's with how much it holds.
  DhtFindValue since{filled_id(0xbb), ""};
  since.since_instance = 0x1234567890abcdefULL;
  since.since_seq = 42;
  auto since_back = round_trip(since);
  CHECK(since_back.since_instance == since.since_instance);
  CHECK(since_back.since_seq == 42);
  DhtValue changes{{owned}, {kContact2}};
  changes.instance = 7;
  changes.seq = 43;
  changes.held = 30;
  auto changes_back = round_trip(changes);
  CHECK(changes_back.entries == std::vector<RecordEntry>{owned});
  CHECK(changes_back.instance == 7);
  CHECK(changes_back.seq == 43);
  CHECK(changes_back.held == 30);
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

TEST_CASE("Golden bytes of every averaging message", "[unit][wire][golden]") {
  // Pieces that recur: c410 7777..77 (bin 16): a group id; c420 3333..33 / 5c5c..5c (bin 32): schema hashes.

  // {"grp": "run1_grad", "schema": bin(0x33 x 32), "ep": "tcp://10.0.0.1:7000", "role": 0, "bw": 1.25e8,
  //  "until": 1700000000.5, "n": 1}
  CHECK(golden(AvgJoin{"run1_grad", Bytes(32, 0x33), "tcp://10.0.0.1:7000", AvgRole::kNode, 1.25e8, 1700000000.5, 1}) ==
        envelope("ccc8", "00",
                 "87a3677270a972756e315f67726164a6736368656d61c4203333333333333333333333333333333333333333333333333333333333333333"
                 "a26570b37463703a2f2f31302e302e302e313a37303030a4726f6c6500a26277ce07735940a5756e74696ccb41d954fc40200000a16e01"));
  // {"gid": bin(0x77 x 16), "ids": [id2, id3], "eps": ["tcp://10.0.0.2:7000", ""], "roles": [0, 1],
  //  "counts": [1000, 0], "len": 1000, "part": 256}
  CHECK(golden(AvgBegin{Bytes(16, 0x77), {filled_id(2), filled_id(3)}, {"tcp://10.0.0.2:7000", ""},
                        {AvgRole::kNode, AvgRole::kClient}, {1000, 0}, 1000, 256}) ==
        envelope("ccc9", "00",
                 "87a3676964c41077777777777777777777777777777777"
                 "a369647392c4140202020202020202020202020202020202020202c4140303030303030303030303030303030303030303"
                 "a365707392b37463703a2f2f31302e302e302e323a37303030a0a5726f6c6573920001a6636f756e747392cd03e800a36c656ecd03e8a470617274cd0100"));
  // {"why": 4, "msg": "follows another leader", "leader": "tcp://10.0.0.9:7000"}
  CHECK(golden(AvgJoinRefused{JoinRefusal::kNotALeader, "follows another leader", "tcp://10.0.0.9:7000"}) ==
        envelope("ccca", "00",
                 "83a377687904a36d7367b6666f6c6c6f777320616e6f74686572206c6561646572a66c6561646572b37463703a2f2f31302e302e302e393a37303030"));
  // {"gid": bin(0x77 x 16), "idx": 3, "w": 2.5, "codec": 1}, one payload frame
  CHECK(golden(AvgPart{Bytes(16, 0x77), 3, 2.5, 1}, 1) ==
        envelope("cccb", "01",
                 "84a3676964c41077777777777777777777777777777777a369647803a177cb4004000000000000a5636f64656301"));
  // Asking for the average itself adds "ans": 1 (left out for the delta, so older peers read the same bytes)
  CHECK(golden(AvgPart{Bytes(16, 0x77), 3, 2.5, 1, PartAnswer::kAverage}, 1) ==
        envelope("cccb", "01",
                 "85a3676964c41077777777777777777777777777777777a369647803a177cb4004000000000000a5636f64656301"
                 "a3616e7301"));
  // In a round summed in a fixed order, the sender's key too: "o": 5 (left out when none)
  CHECK(golden(AvgPart{Bytes(16, 0x77), 3, 2.5, 1, PartAnswer::kAverage, 5}, 1) ==
        envelope("cccb", "01",
                 "86a3676964c41077777777777777777777777777777777a369647803a177cb4004000000000000a5636f64656301"
                 "a3616e7301a16f05"));
  // {"idx": 3, "codec": 1, "n": 3}, one payload frame
  CHECK(golden(AvgPartDelta{3, 1, 3}, 1) == envelope("cccc", "01", "83a369647803a5636f64656301a16e03"));
  // {"idx": 3, "codec": 1, "n": 3, "ans": 1}: the payload is the average
  CHECK(golden(AvgPartDelta{3, 1, 3, PartAnswer::kAverage}, 1) ==
        envelope("cccc", "01", "84a369647803a5636f64656301a16e03a3616e7301"));
  // ... with the part's total weight, "w": 96 (a whole number goes as an integer; left out when nothing was
  // weighed)
  CHECK(golden(AvgPartDelta{3, 1, 3, PartAnswer::kAverage, 96.0}, 1) ==
        envelope("cccc", "01", "85a369647803a5636f64656301a16e03a3616e7301a17760"));
  // A stripe of a pinned epoch: {"key": "run1", "epoch": 7, "off": 1024, "len": 512, "codec": 1}
  CHECK(golden(AvgStateRequest{"run1", 7, 1024, 512, 1, false, false}) ==
        envelope("cccd", "00",
                 "85a36b6579a472756e31a565706f636807a36f6666cd0400a36c656ecd0200a5636f64656301"));
  // A first request, the description only: {"key": "run1", "off": 0, "len": 0, "codec": 0, "desc": true}
  CHECK(golden(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, true, false}) ==
        envelope("cccd", "00",
                 "85a36b6579a472756e31a36f666600a36c656e00a5636f64656300a464657363c3"));
  // Finished: {"key": "run1", "off": 0, "len": 0, "codec": 0, "done": true}
  CHECK(golden(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, false, true}) ==
        envelope("cccd", "00",
                 "85a36b6579a472756e31a36f666600a36c656e00a5636f64656300a4646f6e65c3"));
  // A part: {"key": "run1", "epoch": 7, "schema": bin(0x5c x 32), "total": 12, "off": 4, "len": 8,
  //          "codec": 0, "load": 2}, one payload frame
  AvgStateReply part{"run1", 7, Bytes(32, 0x5c), 12, 4, 8, 0, 2, false, {}, {}};
  CHECK(golden(part, 1) ==
        envelope("ccce", "01",
                 "88a36b6579a472756e31a565706f636807a6736368656d61c4205c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c"
                 "a5746f74616c0ca36f666604a36c656e08a5636f64656300a46c6f616402"));
  // A description: the same fields with len 0 and no frame, then
  //   "tensors": [{"name": "w", "shape": [2, 3]}, {"name": "b", "shape": [6]}],
  //   "meta": {"lr": 0.5, "opt": "lamb"}
  AvgStateReply description{"run1", 7, Bytes(32, 0x5c), 12, 0, 0, 0, 1, true,
                            {{"w", {2, 3}}, {"b", {6}}}, {{"lr", 0.5}, {"opt", std::string("lamb")}}};
  CHECK(golden(description) ==
        envelope("ccce", "00",
                 "8aa36b6579a472756e31a565706f636807a6736368656d61c4205c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c"
                 "a5746f74616c0ca36f666600a36c656e00a5636f64656300a46c6f616401"
                 "a774656e736f72739282a46e616d65a177a5736861706592020382a46e616d65a162a573686170659106"
                 "a46d65746182a26c72cb3fe0000000000000a36f7074a46c616d62"));
  // A round's result, its first stripe: {"round": "run1_grad.5.x", "off": 0, "len": 1024}
  CHECK(golden(AvgResultRequest{"run1_grad.5.x", 0, 1024}) ==
        envelope("cccf", "00", "83a5726f756e64ad72756e315f677261642e352e78a36f666600a36c656ecd0400"));
  // ... and a stripe of it: {"round": "run1_grad.5.x", "schema": bin(0x5c x 32), "total": 12, "n": 3, "off": 4,
  //                          "len": 8}, one payload frame
  CHECK(golden(AvgResultReply{"run1_grad.5.x", Bytes(32, 0x5c), 12, 3, 4, 8}, 1) ==
        envelope("ccd0", "01",
                 "86a5726f756e64ad72756e315f677261642e352e78a6736368656d61c4205c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c"
                 "a5746f74616c0ca16e03a36f666604a36c656e08"));
}

TEST_CASE("Averaging messages decode to the fields they were encoded from, and hostile ones are refused",
          "[unit][wire][golden]") {
  auto decode_body = [](const MapWriter& body, MessageType type) {
    Bytes bytes = encode_header({type, 7, filled_id(1), 0}, body.to_bytes());
    auto decoded = decode_header(bytes, Limits{});
    REQUIRE(decoded.is_ok());
    return decoded.value();
  };
  auto round_trip = [&](const auto& message) {
    using Message = std::decay_t<decltype(message)>;
    MapWriter body;
    message.encode(body);
    auto back = Message::decode(decode_body(body, Message::kType).body());
    REQUIRE(back.is_ok());
    return std::move(back).value();
  };
  auto request = round_trip(AvgStateRequest{"run1", 0, 1024, 512, 4, true, false});
  CHECK(request.key == "run1");
  CHECK(request.epoch == std::optional<std::uint64_t>(0));  // epoch 0 is an epoch, not "any"
  CHECK(request.offset == 1024);
  CHECK(request.length == 512);
  CHECK(request.codec == 4);
  CHECK(request.describe);
  CHECK_FALSE(request.done);
  CHECK_FALSE(round_trip(AvgStateRequest{"run1", std::nullopt, 0, 0, 0, false, true}).epoch.has_value());

  AvgStateReply description{"run1", 9, Bytes(32, 0x5c), 8, 0, 8, 2, 3, true,
                            {{"scalar", {}}, {"empty", {4, 0}}, {"v", {7}}},
                            {{"lr", 0.125}, {"step", 123456789.0}, {"opt", std::string("lamb")}}};
  auto reply = round_trip(description);
  CHECK(reply.epoch == 9);
  CHECK(reply.total == 8);
  CHECK(reply.length == 8);
  CHECK(reply.downloads == 3);
  CHECK(reply.described);
  CHECK(reply.tensors == description.tensors);
  CHECK(reply.metadata == description.metadata);
  CHECK_FALSE(round_trip(AvgStateReply{"run1", 9, Bytes(32, 1), 7, 1, 2, 0, 1, false, {}, {}}).described);

  // Each of these must be refused with kMalformed, never trusted.
  auto refused_request = [&](const std::function<void(MapWriter&)>& fill) {
    MapWriter body;
    fill(body);
    auto r = AvgStateRequest::decode(decode_body(body, MessageType::kAvgStateRequest).body());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kMalformed);
  };
  refused_request([](MapWriter& m) { m.put("key", "").put("off", std::uint64_t{0}).put("len", std::uint64_t{1}).put("codec", std::uint64_t{0}); });
  refused_request([](MapWriter& m) {  // a stripe over the part limit
    m.put("key", "r").put("off", std::uint64_t{0}).put("len", kMaxStatePartElements + 1).put("codec", std::uint64_t{0});
  });
  refused_request([](MapWriter& m) {  // offset + length past 2^48 (and a sum that would overflow)
    m.put("key", "r").put("off", ~std::uint64_t{0} - 3).put("len", std::uint64_t{8}).put("codec", std::uint64_t{0});
  });
  refused_request([](MapWriter& m) { m.put("key", "r").put("off", std::uint64_t{0}).put("len", std::uint64_t{1}).put("codec", std::uint64_t{0}).put("epoch", -1.5); });

  // A message encoded from fields no peer may send: its decoder refuses it as malformed.
  auto refused = [&](const auto& message) {
    using Message = std::decay_t<decltype(message)>;
    MapWriter body;
    message.encode(body);
    auto r = Message::decode(decode_body(body, Message::kType).body());
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == Code::kMalformed);
  };
  AvgStateReply bad = description;
  bad.total = 9;  // the tensors hold 8
  refused(bad);
  refused(AvgResultRequest{"", 0, 8});                                  // no round
  refused(AvgResultRequest{std::string(kMaxGroupKeyBytes + 1, 'r'), 0, 8});
  refused(AvgResultRequest{"r", 0, kMaxStatePartElements + 1});         // a stripe over the part limit
  refused(AvgResultReply{"r", Bytes(32, 1), 8, 0, 0, 8});               // a result of no contribution
  refused(AvgResultReply{"r", Bytes(20, 1), 8, 1, 0, 8});               // a schema hash of 20 bytes
  refused(AvgResultReply{"r", Bytes(32, 1), 8, 1, 4, 8});               // a stripe past the total
  refused(AvgResultReply{"r", Bytes(32, 1), kMaxStateElements + 1, 1, 0, 0});
  CHECK(round_trip(AvgResultReply{"r", Bytes(32, 1), 8, 2, 0, 8}) == AvgResultReply{"r", Bytes(32, 1), 8, 2, 0, 8});
  bad = description;
  bad.tensors[1].name = bad.tensors[0].name;  // a name twice
  refused(bad);
  bad = description;
  bad.tensors[2].shape = {1u << 30, 1u << 30};  // more than the total
  refused(bad);
  bad = description;
  bad.tensors[2].shape = {~std::uint64_t{0}, ~std::uint64_t{0}};  // a product that overflows
  refused(bad);
  bad = description;
  bad.tensors[0].shape.assign(kMaxTensorRank + 1, 1);
  refused(bad);
  bad = description;
  bad.schema_hash.resize(20);
  refused(bad);
  bad = description;
  bad.offset = 5;  // a stripe [5, 13) of an 8-element state
  refused(bad);
  bad = description;
  bad.metadata[""] = 1.0;
  refused(bad);

  // A merging leader's join carries its followers; 'n' must count them, and each must be well formed.
  AvgJoin merge{"run1_grad", Bytes(32, 0x33), "tcp://10.0.0.1:7000", AvgRole::kNode, 1.25e8, 1700000000.5, 3,
                {{filled_id(4), "tcp://10.0.0.4:7000", AvgRole::kNode, 1e8}, {filled_id(5), "", AvgRole::kClient, 2e7}}};
  CHECK(round_trip(merge).companions == merge.companions);
  CHECK(round_trip(AvgJoin{"run1_grad", Bytes(32, 0x33), "", AvgRole::kClient, 1e6, 0, 1}).companions.empty());
  AvgJoin bad_join = merge;
  bad_join.members = 2;  // three peers come
  refused(bad_join);
  bad_join = merge;
  bad_join.companions[0].bandwidth = -1;
  refused(bad_join);
  bad_join = merge;
  bad_join.companions[1].endpoint.assign(300, 'x');
  refused(bad_join);

  // A client's address through its relay rides its join, its merging leader's companions and the BEGIN
  // (pings reach it there); without one nothing is sent, and a BEGIN without "rlys" (an older leader's)
  // decodes to one empty relay per member.
  AvgJoin relayed{"run1_grad", Bytes(32, 0x33), "", AvgRole::kClient, 2e7, 0, 1};
  relayed.relay = "relay://10.0.0.8:7100/p/" + filled_id(6).to_string();
  CHECK(round_trip(relayed).relay == relayed.relay);
  AvgJoin merge_relayed = merge;
  merge_relayed.companions[1].relay = relayed.relay;
  CHECK(round_trip(merge_relayed).companions == merge_relayed.companions);
  CHECK(round_trip(merge).companions[1].relay.empty());
  AvgBegin with_relays{Bytes(16, 0x77), {filled_id(2), filled_id(3)}, {"tcp://10.0.0.2:7000", ""},
                       {AvgRole::kNode, AvgRole::kClient}, {1000, 0}, 1000, 256, {"", relayed.relay}};
  CHECK(round_trip(with_relays).relays == with_relays.relays);
  AvgBegin without_relays = with_relays;
  without_relays.relays.clear();
  CHECK(round_trip(without_relays).relays == std::vector<std::string>{"", ""});
  bad_join = relayed;
  bad_join.relay.assign(300, 'x');
  refused(bad_join);
  AvgBegin bad_begin = with_relays;
  bad_begin.relays = {relayed.relay};  // one relay for two members
  refused(bad_begin);
  bad_begin = with_relays;
  bad_begin.relays[1].assign(300, 'x');
  refused(bad_begin);
  bad = description;
  bad.metadata["big"] = std::string(kMaxStateEntryStringBytes + 1, 'x');
  refused(bad);
}
