// The revocation list's value (dht/revocations.hpp): whole keys only, bounded, owned by the authority.
#include <catch2/catch.hpp>

#include "dedloc/dht/record.hpp"
#include "dedloc/dht/revocations.hpp"

using namespace dedloc;
using namespace dedloc::dht;

TEST_CASE("A revocation list round-trips, and partial or oversized lists are malformed", "[unit][dht][access]") {
  std::set<crypto::PublicKey> revoked{crypto::Identity::generate().public_key(), crypto::Identity::generate().public_key()};
  auto decoded = decode_revocations(encode_revocations(revoked));
  REQUIRE(decoded.is_ok());
  CHECK(*decoded == revoked);
  CHECK(decode_revocations({}).value().empty());

  Bytes partial = encode_revocations(revoked);
  partial.pop_back();
  CHECK(decode_revocations(partial).status().code() == Code::kMalformed);
  Bytes too_many((kMaxRevokedKeys + 1) * crypto::kPublicKeySize, 7);
  CHECK(decode_revocations(too_many).status().code() == Code::kMalformed);
}

TEST_CASE("Only the authority can write its revocation list", "[unit][dht][access]") {
  auto authority = crypto::Identity::generate();
  auto owner = entry_owner(revocation_key(authority.public_key()), std::nullopt);
  REQUIRE(owner.is_ok());
  REQUIRE(owner->has_value());
  CHECK(**owner == authority.public_key());
}
