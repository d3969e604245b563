// Access tokens (crypto/access_token.hpp): issued by a run's authority for one peer's key; forged, expired
// and other authorities' tokens are refused with the reason; the binary and text forms are strict.
#include <catch2/catch.hpp>

#include "dedloc/crypto/access_token.hpp"
#include "dedloc/core/files.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::crypto;

namespace {
constexpr double kNow = 1.8e9;
}  // namespace

TEST_CASE("A token verifies for its authority until it expires", "[unit][crypto][access]") {
  auto authority = Identity::generate();
  auto peer = Identity::generate();
  auto token = AccessToken::issue(authority, peer.public_key(), "alice", static_cast<std::uint64_t>(kNow) + 60);
  REQUIRE(token.is_ok());
  CHECK(token->verify(authority.public_key(), kNow).is_ok());
  CHECK(token->peer_id() == peer.peer_id());

  auto expired = token->verify(authority.public_key(), kNow + 61);
  CHECK(expired.code() == Code::kUnauthorized);
  CHECK_THAT(expired.message(), Catch::Contains("expired"));

  auto other = Identity::generate();
  auto wrong = token->verify(other.public_key(), kNow);
  CHECK(wrong.code() == Code::kUnauthorized);
  CHECK_THAT(wrong.message(), Catch::Contains("not this run's authority"));
}

TEST_CASE("A token with any field changed after signing is forged", "[unit][crypto][access]") {
  auto authority = Identity::generate();
  auto peer = Identity::generate();
  auto token = AccessToken::issue(authority, peer.public_key(), "bob", static_cast<std::uint64_t>(kNow) + 3600);
  REQUIRE(token.is_ok());
  auto longer = *token;
  longer.expires += 86400 * 365;  // someone extends their own token
  CHECK_THAT(longer.verify(authority.public_key(), kNow).message(), Catch::Contains("forged"));
  auto other_peer = *token;
  other_peer.peer = Identity::generate().public_key();  // or hands it to another key
  CHECK_THAT(other_peer.verify(authority.public_key(), kNow).message(), Catch::Contains("forged"));
  auto renamed = *token;
  renamed.name = "mallory";
  CHECK_THAT(renamed.verify(authority.public_key(), kNow).message(), Catch::Contains("forged"));
  // A token signed by the peer itself, claiming the authority's key.
  auto self_signed = AccessToken::issue(peer, peer.public_key(), "bob", token->expires);
  REQUIRE(self_signed.is_ok());
  self_signed->authority = authority.public_key();
  CHECK_THAT(self_signed->verify(authority.public_key(), kNow).message(), Catch::Contains("forged"));
}

TEST_CASE("Tokens round-trip through bytes, text and files, and bad forms are named", "[unit][crypto][access]") {
  auto authority = Identity::generate();
  auto token = AccessToken::issue(authority, Identity::generate().public_key(), "carol", 123456789);
  REQUIRE(token.is_ok());
  auto decoded = AccessToken::decode(token->encode());
  REQUIRE(decoded.is_ok());
  CHECK(decoded->encode() == token->encode());
  auto from_text = AccessToken::from_text("  " + token->to_text() + "\n");
  REQUIRE(from_text.is_ok());
  CHECK(from_text->name == "carol");

  const test::ScopedTempDir tmp("access-token");
  const std::string dir = tmp.path.string();
  REQUIRE(token->save(dir + "/carol.token").is_ok());
  auto loaded = AccessToken::load(dir + "/carol.token");
  REQUIRE(loaded.is_ok());
  CHECK(loaded->encode() == token->encode());

  Bytes bytes = token->encode();
  CHECK(AccessToken::decode(ByteSpan(bytes.data(), bytes.size() - 1)).status().code() == Code::kMalformed);
  bytes[0] = 'X';
  CHECK_THAT(AccessToken::decode(bytes).status().message(), Catch::Contains("bad magic"));
  CHECK_THAT(AccessToken::from_text("hello").status().message(), Catch::Contains("not a dedloc access token"));
  REQUIRE(write_file_atomically(dir + "/bad.token", "dedloc-token-v1:zz\n").is_ok());
  CHECK_THAT(AccessToken::load(dir + "/bad.token").status().message(), Catch::Contains(dir + "/bad.token"));
  CHECK(AccessToken::issue(authority, authority.public_key(), std::string(65, 'x'), 1).status().code() ==
        Code::kInvalidArgument);
  CHECK_THAT(parse_public_key("abc", "--authority").status().message(), Catch::Contains("--authority"));
}
