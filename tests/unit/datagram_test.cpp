// The datagram format (wire/datagram.hpp): what goes in comes out, and what was altered, truncated, sealed
// for someone else or padded is refused with a Status.
#include <catch2/catch.hpp>

#include <sodium.h>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/wire/datagram.hpp"

using namespace dedloc;
using namespace dedloc::wire;

namespace {

DatagramBody sample_body() {
  DatagramBody body;
  body.kind = DatagramKind::kRequest;
  body.request_id = 0x0123456789abcdefULL;
  body.cookie = Cookie{};
  body.cookie->fill(0x5a);
  body.frames = {Bytes{1, 2, 3}, Bytes{}, Bytes(300, 7)};
  return body;
}

void check_same(const DatagramBody& a, const DatagramBody& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.request_id == b.request_id);
  CHECK(a.cookie == b.cookie);
  CHECK(a.frames == b.frames);
}

}  // namespace

TEST_CASE("A datagram body decodes to what was encoded", "[unit][datagram]") {
  const DatagramBody body = sample_body();
  auto decoded = decode_datagram_body(encode_datagram_body(body), 8);
  REQUIRE(decoded.is_ok());
  check_same(*decoded, body);

  DatagramBody bare{DatagramKind::kUseStream, 42, std::nullopt, {}};
  auto again = decode_datagram_body(encode_datagram_body(bare), 8);
  REQUIRE(again.is_ok());
  check_same(*again, bare);
}

TEST_CASE("A datagram body that is cut short, padded or over its frame limit is refused", "[unit][datagram]") {
  const Bytes encoded = encode_datagram_body(sample_body());
  for (size_t n = 0; n < encoded.size(); ++n) {
    auto cut = decode_datagram_body(ByteSpan(encoded.data(), n), 8);
    INFO("cut at " << n);
    CHECK(cut.status().code() == Code::kMalformed);
  }
  Bytes padded = encoded;
  padded.push_back(0);
  CHECK(decode_datagram_body(padded, 8).status().code() == Code::kMalformed);
  CHECK(decode_datagram_body(encoded, 2).status().code() == Code::kTooLarge);  // three frames

  Bytes bad_kind = encoded;
  bad_kind[0] = 9;
  CHECK(decode_datagram_body(bad_kind, 8).status().code() == Code::kMalformed);
  Bytes bad_cookie = encoded;
  bad_cookie[9] = 15;  // a cookie of 15 bytes
  CHECK(decode_datagram_body(bad_cookie, 8).status().code() == Code::kMalformed);
}

TEST_CASE("A sealed datagram opens only for its receiver, and not once altered", "[unit][datagram]") {
  auto alice = crypto::Identity::generate();
  auto bob = crypto::Identity::generate();
  auto eve = crypto::Identity::generate();
  auto alice_to_bob = datagram_shared_key(bob.public_key(), alice.curve_keys().secret_key);
  auto bob_from_alice = datagram_shared_key(alice.public_key(), bob.curve_keys().secret_key);
  auto eve_from_alice = datagram_shared_key(alice.public_key(), eve.curve_keys().secret_key);
  REQUIRE(alice_to_bob);
  REQUIRE(bob_from_alice);
  REQUIRE(eve_from_alice);
  CHECK(*alice_to_bob == *bob_from_alice);

  const Bytes body = encode_datagram_body(sample_body());
  const Bytes datagram = encode_datagram(body, &alice.public_key(), &*alice_to_bob);
  CHECK(datagram.size() == kDatagramPrefixBytes + kSealOverheadBytes + body.size());

  auto envelope = decode_datagram(datagram);
  REQUIRE(envelope.is_ok());
  REQUIRE(envelope->sender == alice.public_key());
  auto opened = open_datagram(*envelope, *bob_from_alice);
  REQUIRE(opened.is_ok());
  CHECK(*opened == body);

  // Someone else cannot read it.
  CHECK(open_datagram(*envelope, *eve_from_alice).status().code() == Code::kUnauthorized);
  // Any byte changed after the prefix (key, nonce, tag, ciphertext) breaks the seal.
  for (size_t at = kDatagramPrefixBytes; at < datagram.size(); at += 7) {
    Bytes altered = datagram;
    altered[at] ^= 0x01;
    auto altered_envelope = decode_datagram(altered);
    REQUIRE(altered_envelope.is_ok());
    INFO("byte " << at);
    auto key = datagram_shared_key(*altered_envelope->sender, bob.curve_keys().secret_key);
    if (key) CHECK(open_datagram(*altered_envelope, *key).status().code() == Code::kUnauthorized);
  }
  // Two seals of the same body differ (a fresh nonce each).
  CHECK(encode_datagram(body, &alice.public_key(), &*alice_to_bob) != datagram);
}

TEST_CASE("A plain datagram carries its body as is, and a wrong prefix is refused", "[unit][datagram]") {
  const Bytes body = encode_datagram_body(sample_body());
  const Bytes datagram = encode_datagram(body, nullptr, nullptr);
  auto envelope = decode_datagram(datagram);
  REQUIRE(envelope.is_ok());
  CHECK_FALSE(envelope->sender);
  CHECK(Bytes(envelope->sealed_or_body.begin(), envelope->sealed_or_body.end()) == body);

  for (size_t n = 0; n < kDatagramPrefixBytes; ++n) {
    CHECK(decode_datagram(ByteSpan(datagram.data(), n)).status().code() == Code::kMalformed);
  }
  Bytes wrong_magic = datagram;
  wrong_magic[0] = 'X';
  CHECK(decode_datagram(wrong_magic).status().code() == Code::kMalformed);
  Bytes wrong_version = datagram;
  wrong_version[2] = 2;
  CHECK(decode_datagram(wrong_version).status().code() == Code::kVersionMismatch);
  Bytes unknown_flag = datagram;
  unknown_flag[3] = 0x80;
  CHECK(decode_datagram(unknown_flag).status().code() == Code::kMalformed);
  Bytes short_seal = datagram;
  short_seal[3] = 1;  // says sealed, but too short to hold a key, a nonce and a tag
  short_seal.resize(kDatagramPrefixBytes + kSealOverheadBytes - 1);
  CHECK(decode_datagram(short_seal).status().code() == Code::kMalformed);
}

TEST_CASE("A key that is not a curve point gives no shared key", "[unit][datagram]") {
  auto bob = crypto::Identity::generate();
  crypto::PublicKey not_a_point{};
  not_a_point.fill(0xff);
  CHECK_FALSE(datagram_shared_key(not_a_point, bob.curve_keys().secret_key));
}

TEST_CASE("A plain datagram's bytes are pinned", "[unit][datagram]") {
  // docs/wire-protocol.md, "Datagrams": a change here is a protocol change.
  DatagramBody body;
  body.kind = DatagramKind::kRequest;
  body.request_id = 0x0102030405060708ULL;
  body.cookie = Cookie{};
  body.cookie->fill(0xcc);
  body.frames = {Bytes{0xaa, 0xbb}, Bytes{}};
  const Bytes datagram = encode_datagram(encode_datagram_body(body), nullptr, nullptr);
  Bytes expected{'D', 'G', 1, 0,              // magic, version, flags (plain)
                 1,                           // kind: request
                 1,   2,   3, 4, 5, 6, 7, 8,  // request id
                 16};                         // cookie length
  expected.insert(expected.end(), 16, 0xcc);  // cookie
  const Bytes frames{2,                       // frame count
                     0, 0, 0, 2, 0xaa, 0xbb,  // a frame of 2 bytes
                     0, 0, 0, 0};             // an empty one
  expected.insert(expected.end(), frames.begin(), frames.end());
  CHECK(datagram == expected);
}
