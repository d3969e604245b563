// Golden bytes of every DHT record family (the catalogue, wire/records.hpp) and every binary frame: the
// exact encoding of a fixed value, and that those bytes decode back to it (through the catalogue, and
// through the reader each family's module uses). Records live in DHTs and fuzz corpora longer than any one version of
// the code, so a failure here means peers already running would stop reading each other; changes are only
// allowed as the compatibility rules of docs/wire-protocol.md say, never by accident. Signed things use
// identities from fixed seeds (ed25519 signatures are deterministic), so their bytes are fixed too.
#include <catch2/catch.hpp>

#include <array>

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/crypto/access_token.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/dht/validator.hpp"
#include "dedloc/relay/relay_directory.hpp"
#include "dedloc/wire/auth_frame.hpp"
#include "dedloc/wire/records.hpp"
#include "dedloc/wire/relay_frames.hpp"

using namespace dedloc;

namespace {

crypto::Identity identity_from(std::uint8_t fill) {
  std::array<std::uint8_t, 32> seed{};
  seed.fill(fill);
  return crypto::Identity::from_seed(seed).value();
}

std::string hex(ByteSpan bytes) { return to_hex(bytes); }

Bytes unhex(std::string_view text) { return from_hex(text).value(); }

Bytes bytes_of(std::string_view text) { return Bytes(text.begin(), text.end()); }

// Every family's schema, as the tools register them.
const dht::RecordValidator& validator() {
  static const dht::RecordValidator v = [] {
    dht::RecordValidator out;
    dht::add_run_record_schemas(out);
    return out;
  }();
  return v;
}

constexpr double kNow = 1.7e9;

// `value` stored under `key` (and `subkey`) as a DHT node would take it, against the registered schemas.
Status validate(std::string_view key, ByteSpan value, std::optional<Bytes> subkey = std::nullopt) {
  wire::RecordEntry entry{std::move(subkey), Bytes(value.begin(), value.end()), kNow + 60, {}};
  return validator().validate(key, entry, kNow);
}

// The public keys of identity_from(0x11) (the owner of the owned records below) and identity_from(0x22).
constexpr std::string_view kKey11 = "d04ab232742bb4ab3a1368bd4615e4e6d0224ab71a016baf8520a332c9778737";
constexpr std::string_view kKey22 = "a09aa5f47a6759802ff955f8dc2d2a14a5c99d23be97f864127ff9383455a4f0";
const std::string kOwnerHex(kKey11);

}  // namespace

TEST_CASE("Golden keys and subkeys of every record family", "[unit][wire][golden][records]") {
  const crypto::Identity owner = identity_from(0x11);
  REQUIRE(hex(owner.public_key()) == kKey11);
  REQUIRE(hex(identity_from(0x22).public_key()) == kKey22);
  CHECK(wire::owner_marker(owner.public_key()) == "[owner:" + kOwnerHex + "]");
  CHECK(wire::progress_key("run1") == "run1_progress");
  CHECK(wire::metrics_key("run1") == "run1_metrics");
  CHECK(wire::donors_key("run1") == "run1_donors");
  CHECK(wire::vector_schema_key("run1") == "run1_grad_schema");
  CHECK(wire::kRelaysKey == "dedloc_relays");
  CHECK(wire::revocation_key(owner.public_key()) == "dedloc_revocations[owner:" + kOwnerHex + "]");
}

TEST_CASE("Golden bytes of a progress record", "[unit][wire][golden][records]") {
  wire::ProgressRecord p;
  p.epoch = 12;
  p.samples_accumulated = 300;
  p.samples_per_second = 41.5;
  p.time = 1700000000.5;
  p.client_mode = true;
  p.bandwidth = 1.25e7;
  p.compute = 64;
  // {"epoch": 12, "n": 300, "sps": 41.5, "t": 1700000000.5, "client": true, "bw": 12500000, "flops": 64}
  // (whole numbers are written as integers, the smallest msgpack form; readers take either)
  const std::string golden =
      "87a565706f63680ca16ecd012ca3737073cb4044c00000000000a174cb41d954fc40200000a6636c69656e74c3"
      "a26277ce00bebc20a5666c6f707340";
  CHECK(hex(wire::encode_progress(p)) == golden);
  auto back = wire::decode_progress(unhex(golden));
  REQUIRE(back.is_ok());
  CHECK(*back == p);
  CHECK(validate("run1_progress", unhex(golden)).is_ok());
  // An older peer's record without the optional fields still decodes.
  // {"epoch": 3, "n": 0, "sps": 0.0, "t": 1700000000.5}
  auto old = wire::decode_progress(unhex("84a565706f636803a16e00a3737073cb0000000000000000a174cb41d954fc40200000"));
  REQUIRE(old.is_ok());
  CHECK(old->epoch == 3);
  CHECK_FALSE(old->client_mode);
  CHECK(old->bandwidth == 0);
}

TEST_CASE("Golden bytes of a metrics record", "[unit][wire][golden][records]") {
  wire::MetricsRecord m;
  m.epoch = 12;
  m.loss = 2.5;
  m.samples_per_second = 41.5;
  m.micro_steps = 7;
  m.role = "aux";
  m.target_batch_size = 4096;
  m.rounds = 9;
  m.time = 1700000000.5;
  // {"epoch": 12, "loss": 2.5, "sps": 41.5, "steps": 7, "t": 1700000000.5, "role": "aux", "B": 4096,
  //  "rounds": 9}
  const std::string golden =
      "88a565706f63680ca46c6f7373cb4004000000000000a3737073cb4044c00000000000a5737465707307"
      "a174cb41d954fc40200000a4726f6c65a3617578a142cd1000a6726f756e647309";
  CHECK(hex(wire::encode_metrics(m)) == golden);
  auto back = wire::decode_metrics(unhex(golden));
  REQUIRE(back.is_ok());
  CHECK(*back == m);
  CHECK(validate("run1_metrics", unhex(golden)).is_ok());

  // Before the first epoch ends there is no loss, and the key is left out rather than written as NaN.
  m.loss.reset();
  m.role = "trainer";
  // {"epoch": 12, "sps": 41.5, "steps": 7, "t": 1700000000.5, "role": "trainer", "B": 4096, "rounds": 9}
  const std::string no_loss =
      "87a565706f63680ca3737073cb4044c00000000000a5737465707307a174cb41d954fc40200000"
      "a4726f6c65a7747261696e6572a142cd1000a6726f756e647309";
  CHECK(hex(wire::encode_metrics(m)) == no_loss);
  back = wire::decode_metrics(unhex(no_loss));
  REQUIRE(back.is_ok());
  CHECK(*back == m);
  // A record without the mode fields (an aux peer's, or from before them): not said, and nothing counted.
  CHECK(back->mode.empty());
  CHECK(back->inner_steps == 0);
  CHECK(back->bytes_sent == 0);
  CHECK(back->samples_computed == 0);

  // A DiLoCo trainer says its mode, its inner steps per outer step and what it sent for what it computed.
  m.mode = "diloco";
  m.inner_steps = 8;
  m.bytes_sent = 123456789;
  m.samples_computed = 65536;
  // {"epoch": 12, "sps": 41.5, "steps": 7, "t": 1700000000.5, "role": "trainer", "B": 4096, "rounds": 9,
  //  "mode": "diloco", "inner": 8, "sent": 123456789, "computed": 65536}
  const std::string diloco =
      "8ba565706f63680ca3737073cb4044c00000000000a5737465707307a174cb41d954fc40200000"
      "a4726f6c65a7747261696e6572a142cd1000a6726f756e647309"
      "a46d6f6465a664696c6f636fa5696e6e657208a473656e74ce075bcd15a8636f6d7075746564ce00010000";
  CHECK(hex(wire::encode_metrics(m)) == diloco);
  back = wire::decode_metrics(unhex(diloco));
  REQUIRE(back.is_ok());
  CHECK(*back == m);
  CHECK(validate("run1_metrics", unhex(diloco)).is_ok());
}

TEST_CASE("Golden bytes of a donor record", "[unit][wire][golden][records]") {
  const crypto::Identity donor = identity_from(0x22);
  const std::string address = "tcp://10.0.0.5:7000/k/" + hex(donor.public_key());
  const wire::DonorRecord record{address, 12, 1, 4, 1.0, 1700000000.5};
  // {"ep": "tcp://10.0.0.5:7000/k/a09aa5...a4f0", "epoch": 12, "load": 1, "max": 4, "prio": 1,
  //  "t": 1700000000.5}
  const std::string golden =
      "86a26570d956"
      "7463703a2f2f31302e302e302e353a373030302f6b2f"  // "tcp://10.0.0.5:7000/k/"
      "61303961613566343761363735393830326666393535663864633264326131346135633939643233626539376638363431"
      "323766663933383334353561346630"
      "a565706f63680ca46c6f616401a36d617804a47072696f01"
      "a174cb41d954fc40200000";  // "t": the refresh time, added after the others (see below)
  CHECK(hex(wire::encode_donor(record)) == golden);
  CHECK(wire::decode_donor(unhex(golden)).value() == record);
  // As a downloader reads it from the DHT, with the donor's address in the subkey.
  auto back = avg::parse_donor(dht::FoundEntry{bytes_of(address), unhex(golden), kNow + 60});
  REQUIRE(back.is_ok());
  CHECK(back->address.endpoint == address);
  CHECK(back->address.peer_id == donor.peer_id());
  CHECK(back->epoch == 12);
  CHECK(back->downloads == 1);
  CHECK(back->max_downloads == 4);
  CHECK(back->priority == 1.0);
  CHECK(back->refreshed == 1700000000.5);
  CHECK(back->expiration == kNow + 60);
  CHECK(validate("run1_donors", unhex(golden), bytes_of(address)).is_ok());

  // The record as peers wrote it before "t" (the bytes this test pinned then): still read and stored, with
  // the refresh time unknown (0), which ranking treats as fresh.
  const std::string before_refresh_time =
      "85a26570d956"
      "7463703a2f2f31302e302e302e353a373030302f6b2f"
      "61303961613566343761363735393830326666393535663864633264326131346135633939643233626539376638363431"
      "323766663933383334353561346630"
      "a565706f63680ca46c6f616401a36d617804a47072696f01";
  auto old = wire::decode_donor(unhex(before_refresh_time));
  REQUIRE(old.is_ok());
  CHECK(*old == wire::DonorRecord{address, 12, 1, 4, 1.0, 0});
  back = avg::parse_donor(dht::FoundEntry{bytes_of(address), unhex(before_refresh_time), kNow + 60});
  REQUIRE(back.is_ok());
  CHECK(back->refreshed == 0);
  CHECK(validate("run1_donors", unhex(before_refresh_time), bytes_of(address)).is_ok());
}

TEST_CASE("Golden bytes of the vector schema record", "[unit][wire][golden][records]") {
  const wire::VectorSchema schema{Bytes(32, 0xab), 1000};
  // {"hash": bin 32 x ab, "len": 1000}
  const std::string golden = "82a468617368c420abababababababababababababababababababababababababababababababab"
                             "a36c656ecd03e8";
  CHECK(hex(wire::encode_vector_schema(schema)) == golden);
  auto back = wire::decode_vector_schema(unhex(golden));
  REQUIRE(back.is_ok());
  CHECK(*back == schema);
}

TEST_CASE("Golden bytes of a round result record", "[unit][wire][golden][records]") {
  const wire::RoundResultRecord record{Bytes(32, 0xab), 1000, 3};
  // {"hash": bin 32 x ab, "len": 1000, "n": 3}, under "run1_grad.5.x_held"
  const std::string golden = "83a468617368c420abababababababababababababababababababababababababababababababab"
                             "a36c656ecd03e8a16e03";
  CHECK(wire::round_result_key("run1_grad.5.x") == "run1_grad.5.x_held");
  CHECK(hex(wire::encode_round_result(record)) == golden);
  CHECK(wire::decode_round_result(unhex(golden)).value() == record);
  CHECK(validate("run1_grad.5.x_held", unhex(golden), bytes_of("tcp://10.0.0.5:7000")).is_ok());
  // Refused: no contribution, a hash of the wrong size.
  CHECK(wire::decode_round_result(wire::encode_round_result({Bytes(32, 0xab), 1000, 0})).status().code() ==
        Code::kMalformed);
  CHECK(wire::decode_round_result(wire::encode_round_result({Bytes(8, 0xab), 1000, 1})).status().code() ==
        Code::kMalformed);
  CHECK_FALSE(validate("run1_grad.5.x_held", wire::encode_round_result({Bytes(32, 0xab), 1000, 0}),
                       bytes_of("tcp://10.0.0.5:7000")).is_ok());
}

TEST_CASE("Golden bytes of a relay listing", "[unit][wire][golden][records]") {
  const crypto::Identity relay = identity_from(0x11);
  const std::string address = "tcp://10.0.0.9:7100/k/" + kOwnerHex;
  const Bytes subkey = bytes_of(wire::owner_marker(relay.public_key()));
  const wire::RelayRecord record{address, 3, 64};
  // {"addr": "tcp://10.0.0.9:7100/k/d04ab2...8737", "peers": 3, "max": 64}
  const std::string golden =
      "83a461646472d956"
      "7463703a2f2f31302e302e302e393a373130302f6b2f"  // "tcp://10.0.0.9:7100/k/"
      "64303461623233323734326262346162336131333638626434363135653465366430323234616237316130313662616638"
      "353230613333326339373738373337"
      "a5706565727303a36d617840";
  CHECK(hex(wire::encode_relay_listing(record)) == golden);
  CHECK(wire::decode_relay_listing(unhex(golden)).value() == record);
  // As a peer reads it from the DHT: the address must name the owner of the subkey.
  auto back = relay::parse_relay_listing(dht::FoundEntry{subkey, unhex(golden), kNow + 60});
  REQUIRE(back.is_ok());
  CHECK(back->address.to_string() == address);
  CHECK(back->address.peer_id == relay.peer_id());
  CHECK(back->peers == 3);
  CHECK(back->max_peers == 64);
  wire::RecordEntry signed_entry{subkey, unhex(golden), kNow + 60, {}};
  REQUIRE(dht::sign_entry(relay, relay::kRelaysKey, signed_entry).is_ok());
  CHECK(validator().validate(relay::kRelaysKey, signed_entry, kNow).is_ok());
}

TEST_CASE("Golden bytes of a revocation list", "[unit][wire][golden][records]") {
  const crypto::PublicKey a = identity_from(0x11).public_key(), b = identity_from(0x22).public_key();
  // The keys, 32 bytes each, in ascending order whatever order they were revoked in.
  const std::string golden = std::string(kKey22) + std::string(kKey11);
  CHECK(hex(wire::encode_revocations({a, b})) == golden);
  CHECK(hex(wire::encode_revocations({})).empty());
  auto back = wire::decode_revocations(unhex(golden));
  REQUIRE(back.is_ok());
  CHECK(*back == std::set<crypto::PublicKey>{a, b});
}

namespace {

crypto::PeerId relay_peer_id() {
  std::array<std::uint8_t, crypto::PeerId::kSize> id{};
  id.fill(0x7e);
  return crypto::PeerId(id);
}

constexpr std::uint64_t kTimeMs = 1700000000123;

}  // namespace

TEST_CASE("Golden bytes of the relay routing frames (DLR1)", "[unit][wire][golden][frames]") {
  // "DLR1" = 444c5231, then the tag byte, then the id.
  struct Case {
    wire::RelayTag tag;
    Bytes id;
    std::string golden;
  };
  const crypto::PeerId target_id = relay_peer_id();
  const Bytes target(target_id.span().begin(), target_id.span().end());
  const std::vector<Case> cases = {
      {wire::RelayTag::kForward, target, "444c5231467e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e"},
      {wire::RelayTag::kRequest, bytes_of("t1"), "444c5231517431"},
      {wire::RelayTag::kReply, bytes_of("t1"), "444c5231527431"},
      {wire::RelayTag::kAttach, {}, "444c523141"},
      {wire::RelayTag::kAttachAnswer, {}, "444c523161"},
      {wire::RelayTag::kHeartbeat, {}, "444c523148"},
  };
  for (const auto& c : cases) {
    CHECK(hex(wire::encode_relay_frame(c.tag, c.id)) == c.golden);
    auto back = wire::decode_relay_frame(unhex(c.golden));
    REQUIRE(back.is_ok());
    REQUIRE(back->has_value());
    CHECK((*back)->tag == c.tag);
    CHECK((*back)->id == c.id);
  }
  // Anything else is an ordinary dedloc header: not the relay's.
  auto header = wire::decode_relay_frame(unhex("87a56d61676963"));
  REQUIRE(header.is_ok());
  CHECK_FALSE(header->has_value());
}

TEST_CASE("Golden bytes of a relay attach proof and the relay's answer", "[unit][wire][golden][frames]") {
  const crypto::Identity peer = identity_from(0x33);
  // {"key": bin 32, "t": 1700000000123, "sig": bin 64}: the signature over "dedloc-relay-attach-v1" ||
  // relay PeerID || t (u64 LE).
  const std::string golden =
      "83a36b6579c42017cb79fb2b4120f2b1ec65e4198d6e08b28e813feb01e4a400839b85e18080ce"
      "a174cf0000018bcfe5687b"
      "a3736967c4403f6aeaa11864cbed0fc24283d790f17fdb1f738c939e197750618ed83532fe371ce775787a7aa2e3497cd45db10972b1"
      "2d1e24b4222b13c7aab29fd8da66300f";
  CHECK(hex(wire::encode_attach_proof(peer, relay_peer_id(), kTimeMs)) == golden);
  auto back = wire::verify_attach_proof(unhex(golden), relay_peer_id(), kTimeMs, 60'000);
  REQUIRE(back.is_ok());
  CHECK(back->peer == peer.peer_id());
  CHECK(back->access_token.empty());
  // In a private run the map also carries the peer's token: {"key", "t", "sig", "tok": bin}.
  const std::string with_token =
      "84a36b6579c42017cb79fb2b4120f2b1ec65e4198d6e08b28e813feb01e4a400839b85e18080ce"
      "a174cf0000018bcfe5687b"
      "a3736967c4403f6aeaa11864cbed0fc24283d790f17fdb1f738c939e197750618ed83532fe371ce775787a7aa2e3497cd45db10972b1"
      "2d1e24b4222b13c7aab29fd8da66300f"
      "a3746f6bc403746f6b";
  CHECK(hex(wire::encode_attach_proof(peer, relay_peer_id(), kTimeMs, bytes_of("tok"))) == with_token);
  back = wire::verify_attach_proof(unhex(with_token), relay_peer_id(), kTimeMs, 60'000);
  REQUIRE(back.is_ok());
  CHECK(back->access_token == bytes_of("tok"));

  // {"code": 0, "why": ""}
  CHECK(hex(wire::encode_attach_answer(Status::ok())) == "82a4636f646500a3776879a0");
  CHECK(wire::decode_attach_answer(unhex("82a4636f646500a3776879a0")).is_ok());
  // {"code": 8, "why": "full"}
  CHECK(hex(wire::encode_attach_answer(error(Code::kRefused, "full"))) == "82a4636f646508a3776879a466756c6c");
  Status refused = wire::decode_attach_answer(unhex("82a4636f646508a3776879a466756c6c"));
  CHECK(refused.code() == Code::kRefused);
  CHECK(refused.message() == "relay: full");
}

TEST_CASE("Golden bytes of an access token (DLT1)", "[unit][wire][golden][frames]") {
  const crypto::Identity authority = identity_from(0x44), peer = identity_from(0x33);
  auto token = crypto::AccessToken::issue(authority, peer.public_key(), "alice", 1800000000);
  REQUIRE(token.is_ok());
  // "DLT1" | authority key | peer key | expires u64 BE | name length u8 | "alice" | signature
  const std::string golden =
      "444c5431"
      "d759793bbc13a2819a827c76adb6fba8a49aee007f49f2d0992d99b825ad2c48"
      "17cb79fb2b4120f2b1ec65e4198d6e08b28e813feb01e4a400839b85e18080ce"
      "000000006b49d200"
      "05616c696365"
      "ddd08f49c04084cc1f8b487de12b2c52b3d0e4a554e213186c43b1df0f9a828f5c5c8da13d66c5a15fe04d9946f922d13885efbf6b5493"
      "4a881497de3cda380a";
  CHECK(hex(token->encode()) == golden);
  CHECK(token->to_text() == "dedloc-token-v1:" + golden);
  auto back = crypto::AccessToken::decode(unhex(golden));
  REQUIRE(back.is_ok());
  CHECK(back->authority == authority.public_key());
  CHECK(back->peer == peer.public_key());
  CHECK(back->expires == 1800000000);
  CHECK(back->name == "alice");
  CHECK(back->signature == token->signature);
  CHECK(back->verify(authority.public_key(), 1.7e9).is_ok());
}

TEST_CASE("Golden bytes of an authentication frame (DLA1)", "[unit][wire][golden][frames]") {
  const crypto::Identity authority = identity_from(0x44), peer = identity_from(0x33);
  const Bytes token = crypto::AccessToken::issue(authority, peer.public_key(), "alice", 1800000000).value().encode();
  const Bytes header = bytes_of("header");
  std::array<std::uint8_t, wire::kNonceBytes> nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<std::uint8_t>(0x10 + i);
  // "dedloc-message-v1" | u64 BE header length | header | time u64 BE | nonce
  const Bytes signed_bytes = wire::auth_signed_bytes(header, kTimeMs, nonce);
  CHECK(hex(signed_bytes) ==
        "6465646c6f632d6d6573736167652d7631"
        "0000000000000006" "686561646572"
        "0000018bcfe5687b"
        "101112131415161718191a1b1c1d1e1f");
  wire::AuthFrame frame{token, kTimeMs, nonce, peer.sign(signed_bytes)};
  // "DLA1" | token length u16 BE | token | time u64 BE | nonce | signature
  const std::string golden =
      "444c4131"
      "0092"
      "444c5431d759793bbc13a2819a827c76adb6fba8a49aee007f49f2d0992d99b825ad2c4817cb79fb2b4120f2b1ec65e4198d6e08b2"
      "8e813feb01e4a400839b85e18080ce000000006b49d20005616c696365ddd08f49c04084cc1f8b487de12b2c52b3d0e4a554e21318"
      "6c43b1df0f9a828f5c5c8da13d66c5a15fe04d9946f922d13885efbf6b54934a881497de3cda380a"
      "0000018bcfe5687b"
      "101112131415161718191a1b1c1d1e1f"
      "f185b4fb8737baf06139f4e2dcaa6a9aac815b5ecf35a1970dee5be4c2282f1079bb36b3b97734967a717a217be27eba56f6bc7cf769b1"
      "674d969d424c330e02";
  CHECK(hex(wire::encode_auth_frame(frame)) == golden);
  auto back = wire::decode_auth_frame(unhex(golden));
  REQUIRE(back.is_ok());
  CHECK(back->token == token);
  CHECK(back->time_ms == kTimeMs);
  CHECK(back->nonce == nonce);
  CHECK(back->signature == frame.signature);
  CHECK(crypto::verify_signature(peer.public_key(), signed_bytes, back->signature));
}
