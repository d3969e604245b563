#include <catch2/catch.hpp>

#include <random>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::wire;

namespace {

Bytes ping_header(std::uint64_t rid, const crypto::PeerId& from = {}) {
  MapWriter body;
  Ping{12.5}.encode(body);
  return encode_header({MessageType::kPing, rid, from, 0}, body.to_bytes());
}

Bytes header_with(std::string_view magic, std::uint64_t version) {
  MapWriter body;
  MapWriter h;
  h.put("magic", magic).put("ver", version).put("type", std::uint64_t{2}).put("rid", std::uint64_t{9})
      .put("nf", std::uint64_t{0}).put_map("body", body);
  return h.to_bytes();
}

}  // namespace

TEST_CASE("An envelope round-trips type, request id, sender and frame count", "[unit][wire]") {
  auto id = crypto::Identity::generate();
  Bytes bytes = ping_header(77, id.peer_id());
  auto decoded = decode_header(bytes, Limits{});
  REQUIRE(decoded.is_ok());
  CHECK(decoded->envelope().type == MessageType::kPing);
  CHECK(decoded->envelope().request_id == 77);
  CHECK(decoded->envelope().sender == id.peer_id());
  auto ping = Ping::decode(decoded->body());
  REQUIRE(ping.is_ok());
  CHECK(ping->sent_unix_time == 12.5);
}

TEST_CASE("Wrong magic and wrong version are refused with a clear error", "[unit][wire]") {
  auto wrong_version = decode_header(header_with(kMagic, 2), Limits{});
  REQUIRE_FALSE(wrong_version.is_ok());
  CHECK(wrong_version.status().code() == Code::kVersionMismatch);
  CHECK(wrong_version.status().message() == "protocol version 2 is not supported (this peer speaks 1)");
  // The request id is still readable, so the server can address its error reply.
  CHECK(peek_request_id(header_with(kMagic, 2), Limits{}) == 9u);

  auto wrong_magic = decode_header(header_with("hivemind", 1), Limits{});
  REQUIRE_FALSE(wrong_magic.is_ok());
  CHECK(wrong_magic.status().code() == Code::kVersionMismatch);
}

TEST_CASE("Every truncation of a valid header is rejected without a crash", "[unit][wire]") {
  Bytes bytes = ping_header(5);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto decoded = decode_header(ByteSpan(bytes.data(), n), Limits{});
    CHECK_FALSE(decoded.is_ok());
  }
  Bytes longer = bytes;
  longer.push_back(0xc0);
  auto trailing = decode_header(longer, Limits{});
  REQUIRE_FALSE(trailing.is_ok());
  CHECK(trailing.status().message() == "header has 1 trailing bytes");
}

TEST_CASE("Limits bound headers, strings, collections, depth and frame counts", "[unit][wire]") {
  Limits small;
  small.max_header_bytes = 64;
  MapWriter big_body;
  big_body.put("s", std::string(100, 'x'));
  auto too_big = decode_header(encode_header({MessageType::kPing, 1, {}, 0}, big_body.to_bytes()), small);
  CHECK(too_big.status().code() == Code::kTooLarge);

  Limits strings;
  strings.max_string_bytes = 16;
  auto long_string = decode_header(encode_header({MessageType::kPing, 1, {}, 0}, big_body.to_bytes()), strings);
  CHECK(long_string.status().code() == Code::kTooLarge);

  Limits frames;
  frames.max_frames = 2;
  MapWriter empty;
  auto many = decode_header(encode_header({MessageType::kPing, 1, {}, 3}, empty.to_bytes()), frames);
  CHECK(many.status().code() == Code::kTooLarge);

  // 40 nested arrays: deeper than the default depth limit of 16.
  Bytes deep(40, 0x91);
  deep.push_back(0xc0);
  auto nested = decode_header(deep, Limits{});
  CHECK(nested.status().code() == Code::kTooLarge);
}

TEST_CASE("Random bytes never crash the decoder", "[unit][wire]") {
  std::mt19937_64 rng(1234);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    Bytes bytes(rng() % 96);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    if (decode_header(bytes, Limits{}).is_ok()) ++accepted;
  }
  CHECK(accepted == 0);  // random bytes essentially never form a valid dedloc header
}
