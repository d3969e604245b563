// Owned records (record.hpp), the validator every stored or read entry goes through (validator.hpp), and the
// declarative value schemas (record_schema.hpp). Identities come from fixed seeds so failures reproduce.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "dedloc/dht/record.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/dht/validator.hpp"
#include "dedloc/wire/map_codec.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using Catch::Matchers::Contains;
using crypto::Identity;

namespace {

Identity identity(std::uint8_t n) {
  Bytes seed(32, n);
  return Identity::from_seed(seed).value();
}

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

RecordEntry entry(std::optional<std::string> subkey, const std::string& value, double expiration) {
  RecordEntry e;
  if (subkey) e.subkey = bytes(*subkey);
  e.value = bytes(value);
  e.expiration = expiration;
  return e;
}

// The code check_owner_signature gives `e` under `key_name`.
Code owner_check(std::string_view key_name, const RecordEntry& e) { return check_owner_signature(key_name, e).code(); }

}  // namespace

TEST_CASE("A key id is BLAKE2b-160 of the key name: stable and distinct", "[unit][dht]") {
  CHECK(key_id("run1_progress") == key_id("run1_progress"));
  CHECK(key_id("run1_progress") != key_id("run2_progress"));
  CHECK(key_id("run1_progress") != key_id("run1_progress "));
  // Known answers (hashlib.blake2b(name, digest_size=20)): peers in other languages derive the same ids.
  CHECK(key_id("").to_string() == "3345524abf6bbe1809449224b5972c41790b6cf2");
  CHECK(key_id("run1_progress").to_string() == "dac057176b4f0bc5caa65a7048a896cf4bfaacef");
}

TEST_CASE("An owner marker in the key name or in the subkey names the entry's owner", "[unit][dht]") {
  Identity alice = identity(1), bob = identity(2);
  std::string marker = owner_marker(alice.public_key());
  CHECK(marker == "[owner:" + to_hex({alice.public_key().data(), alice.public_key().size()}) + "]");
  CHECK(marker.size() == 7 + 64 + 1);

  auto found = find_owner(as_bytes("run1_" + marker + "_donors"));
  REQUIRE(found.is_ok());
  REQUIRE(found->has_value());
  CHECK(**found == alice.public_key());
  auto none = find_owner(as_bytes("run1_progress"));
  REQUIRE(none.is_ok());
  CHECK_FALSE(none->has_value());

  // In the key name: every entry under it is owned.
  auto by_key = entry_owner("run1_" + marker, bytes("any subkey"));
  REQUIRE(by_key.is_ok());
  REQUIRE(by_key->has_value());
  CHECK(**by_key == alice.public_key());
  // In the subkey only: that one entry is owned, its neighbours under the same key are not.
  auto by_subkey = entry_owner("run1_progress", bytes(owner_marker(bob.public_key())));
  REQUIRE(by_subkey.is_ok());
  REQUIRE(by_subkey->has_value());
  CHECK(**by_subkey == bob.public_key());
  auto plain = entry_owner("run1_progress", bytes("peer-a"));
  REQUIRE(plain.is_ok());
  CHECK_FALSE(plain->has_value());
  auto no_subkey = entry_owner("run1_progress", std::nullopt);
  REQUIRE(no_subkey.is_ok());
  CHECK_FALSE(no_subkey->has_value());
  // Both naming the same owner is fine.
  auto both = entry_owner("run1_" + marker, bytes(marker + "x"));
  REQUIRE(both.is_ok());
  REQUIRE(both->has_value());
  CHECK(**both == alice.public_key());
}

TEST_CASE("Ambiguous or malformed owner markers are refused, never taken as unowned", "[unit][dht]") {
  Identity alice = identity(1), bob = identity(2);
  std::string a = owner_marker(alice.public_key()), b = owner_marker(bob.public_key());
  std::string hex = to_hex({alice.public_key().data(), alice.public_key().size()});

  // The key name and the subkey name different owners.
  auto conflict = entry_owner("run1_" + a, bytes(b));
  REQUIRE_FALSE(conflict.is_ok());
  CHECK(conflict.status().code() == Code::kMalformed);
  // Two markers in one name, even the same owner twice.
  CHECK(find_owner(as_bytes(a + b)).status().code() == Code::kMalformed);
  CHECK(find_owner(as_bytes(a + a)).status().code() == Code::kMalformed);
  // Not 64 hex digits: a non-hex digit, too short, too long, unterminated.
  std::string bad_digit = hex;
  bad_digit[10] = 'g';
  CHECK(find_owner(as_bytes("[owner:" + bad_digit + "]")).status().code() == Code::kMalformed);
  CHECK(find_owner(as_bytes("[owner:" + hex.substr(2) + "]")).status().code() == Code::kMalformed);
  CHECK(find_owner(as_bytes("[owner:" + hex + "00]")).status().code() == Code::kMalformed);
  CHECK(find_owner(as_bytes("[owner:" + hex)).status().code() == Code::kMalformed);
  CHECK(find_owner(as_bytes("[owner:]")).status().code() == Code::kMalformed);

  // A malformed name fails the owner check too (it is not waved through as an unowned entry)...
  CHECK(owner_check("run1_[owner:" + bad_digit + "]", entry(std::nullopt, "v", 100)) == Code::kMalformed);
  CHECK(owner_check("run1_" + a, entry(b, "v", 100)) == Code::kMalformed);
  // ...and cannot be signed.
  RecordEntry e = entry(b, "v", 100);
  CHECK(sign_entry(alice, "run1_" + a, e).code() == Code::kMalformed);
}

TEST_CASE("Unowned entries need no signature, owned ones pass with their owner's", "[unit][dht]") {
  Identity alice = identity(1);
  std::string marker = owner_marker(alice.public_key());

  RecordEntry unowned = entry("peer-a", "epoch 3", 1000);
  unowned.signature = bytes("stale");
  REQUIRE(sign_entry(alice, "run1_progress", unowned).is_ok());
  CHECK(unowned.signature.empty());  // signing an unowned entry clears any signature
  CHECK(check_owner_signature("run1_progress", unowned).is_ok());

  RecordEntry by_key = entry(std::nullopt, "donor list", 1000);
  REQUIRE(sign_entry(alice, "run1_" + marker, by_key).is_ok());
  CHECK(by_key.signature.size() == crypto::kSignatureSize);
  CHECK(check_owner_signature("run1_" + marker, by_key).is_ok());

  RecordEntry by_subkey = entry(marker, "epoch 3", 1000);
  REQUIRE(sign_entry(alice, "run1_progress", by_subkey).is_ok());
  CHECK(by_subkey.signature.size() == crypto::kSignatureSize);
  CHECK(check_owner_signature("run1_progress", by_subkey).is_ok());

  // Owners re-sign to change their own entries, expiration included.
  RecordEntry renewed = by_subkey;
  renewed.expiration = 2000;
  renewed.value = bytes("epoch 4");
  REQUIRE(sign_entry(alice, "run1_progress", renewed).is_ok());
  CHECK(check_owner_signature("run1_progress", renewed).is_ok());
  CHECK(renewed.signature != by_subkey.signature);
}

TEST_CASE("Owned entries that were forged or tampered with are unauthorized", "[unit][dht]") {
  Identity alice = identity(1), mallory = identity(3);
  std::string marker = owner_marker(alice.public_key());
  const std::string key = "run1_" + marker;

  // A dictionary entry of an owned key, and an owned subkey of an open key.
  RecordEntry signed_entry = entry("peer-a", "epoch 3", 1000);
  REQUIRE(sign_entry(alice, key, signed_entry).is_ok());
  REQUIRE(check_owner_signature(key, signed_entry).is_ok());
  RecordEntry signed_subkey = entry(marker + "a", "epoch 3", 1000);
  REQUIRE(sign_entry(alice, "run1_progress", signed_subkey).is_ok());
  REQUIRE(check_owner_signature("run1_progress", signed_subkey).is_ok());

  SECTION("signed by another identity") {
    RecordEntry forged = entry("peer-a", "epoch 99", 1000);
    CHECK(sign_entry(mallory, key, forged).code() == Code::kUnauthorized);  // it refuses to sign another's entry
    auto signature = mallory.sign(signing_payload(key_id(key), forged.subkey, forged.value, forged.expiration));
    forged.signature.assign(signature.begin(), signature.end());
    CHECK(owner_check(key, forged) == Code::kUnauthorized);
  }
  SECTION("the value altered after signing") {
    RecordEntry altered = signed_entry;
    altered.value = bytes("epoch 4");
    CHECK(owner_check(key, altered) == Code::kUnauthorized);
    altered.value = bytes("epoch 3 ");  // even one byte appended
    CHECK(owner_check(key, altered) == Code::kUnauthorized);
  }
  SECTION("the expiration extended after signing") {
    RecordEntry extended = signed_entry;
    extended.expiration = 1000.5;
    CHECK(owner_check(key, extended) == Code::kUnauthorized);
    extended.expiration = 1e12;
    CHECK(owner_check(key, extended) == Code::kUnauthorized);
  }
  SECTION("the signature moved to another key or subkey of the same owner") {
    CHECK(owner_check("run2_" + marker, signed_entry) == Code::kUnauthorized);
    RecordEntry other_subkey = signed_entry;
    other_subkey.subkey = bytes("peer-b");
    CHECK(owner_check(key, other_subkey) == Code::kUnauthorized);
    RecordEntry as_plain = signed_entry;  // a dictionary entry replayed as the key's plain value
    as_plain.subkey.reset();
    CHECK(owner_check(key, as_plain) == Code::kUnauthorized);
    RecordEntry moved_owned_subkey = signed_subkey;
    moved_owned_subkey.subkey = bytes(marker + "b");
    CHECK(owner_check("run1_progress", moved_owned_subkey) == Code::kUnauthorized);
    CHECK(owner_check("run2_progress", signed_subkey) == Code::kUnauthorized);
  }
  SECTION("the signature missing or mangled") {
    RecordEntry missing = signed_entry;
    missing.signature.clear();
    CHECK(owner_check(key, missing) == Code::kUnauthorized);
    RecordEntry missing_subkey = signed_subkey;
    missing_subkey.signature.clear();
    CHECK(owner_check("run1_progress", missing_subkey) == Code::kUnauthorized);
    RecordEntry truncated = signed_entry;
    truncated.signature.pop_back();
    CHECK(owner_check(key, truncated) == Code::kUnauthorized);
    RecordEntry flipped = signed_entry;
    flipped.signature[5] ^= 0x01;
    CHECK(owner_check(key, flipped) == Code::kUnauthorized);
  }
}

TEST_CASE("The validator refuses expirations too far ahead or not finite", "[unit][dht]") {
  const double now = 1.7e9;
  RecordValidator validator({.max_ttl_seconds = 3600});
  CHECK(validator.validate("run1_progress", entry("a", "v", now + 60), now).is_ok());
  CHECK(validator.validate("run1_progress", entry("a", "v", now + 3600), now).is_ok());
  CHECK(validator.validate("run1_progress", entry("a", "v", now + 3601), now).code() == Code::kRefused);
  CHECK(validator.validate("run1_progress", entry(std::nullopt, "v", now + 1e9), now).code() == Code::kRefused);
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(validator.validate("run1_progress", entry("a", "v", inf), now).code() == Code::kMalformed);
  CHECK(validator.validate("run1_progress", entry("a", "v", -inf), now).code() == Code::kMalformed);
  CHECK(validator.validate("run1_progress", entry("a", "v", std::nan("")), now).code() == Code::kMalformed);

  // The default allows 30 days.
  RecordValidator defaults;
  CHECK(defaults.validate("k", entry(std::nullopt, "v", now + 29 * 86400.0), now).is_ok());
  CHECK(defaults.validate("k", entry(std::nullopt, "v", now + 31 * 86400.0), now).code() == Code::kRefused);
}

TEST_CASE("The validator checks owners' signatures", "[unit][dht]") {
  const double now = 1000;
  Identity alice = identity(1), mallory = identity(3);
  std::string key = "run1_" + owner_marker(alice.public_key());
  RecordValidator validator;
  RecordEntry e = entry(std::nullopt, "v", now + 60);
  CHECK(validator.validate(key, e, now).code() == Code::kUnauthorized);  // unsigned
  REQUIRE(sign_entry(alice, key, e).is_ok());
  CHECK(validator.validate(key, e, now).is_ok());
  auto signature = mallory.sign(signing_payload(key_id(key), e.subkey, e.value, e.expiration));
  e.signature.assign(signature.begin(), signature.end());
  CHECK(validator.validate(key, e, now).code() == Code::kUnauthorized);
}

TEST_CASE("Schemas apply to keys by suffix, and a record must pass every matching one", "[unit][dht]") {
  const double now = 1000;
  RecordValidator validator;
  int short_calls = 0, p_calls = 0;
  // "_progress" values start with 'p'; "progress" values (a wider suffix) are at most 4 bytes.
  validator.add_schema("_progress", [&](std::string_view, const RecordEntry& e) -> Status {
    ++p_calls;
    return !e.value.empty() && e.value[0] == 'p' ? Status{} : error(Code::kMalformed, "must start with 'p'");
  });
  validator.add_schema("progress", [&](std::string_view, const RecordEntry& e) -> Status {
    ++short_calls;
    return e.value.size() <= 4 ? Status{} : error(Code::kRefused, "must be at most 4 bytes");
  });

  CHECK(validator.validate("run1_progress", entry("a", "p123", now + 1), now).is_ok());
  CHECK(p_calls == 1);
  CHECK(short_calls == 1);

  auto not_p = validator.validate("run1_progress", entry("a", "x", now + 1), now);
  CHECK(not_p.code() == Code::kMalformed);
  CHECK_THAT(not_p.message(), Contains("record 'run1_progress'") && Contains("must start with 'p'"));
  auto too_long = validator.validate("run1_progress", entry("a", "p12345", now + 1), now);  // passes the first only
  CHECK(too_long.code() == Code::kRefused);
  CHECK_THAT(too_long.message(), Contains("at most 4 bytes"));

  // "run1progress" matches only the wider suffix; keys that merely contain a suffix match none.
  CHECK(validator.validate("run1progress", entry("a", "x", now + 1), now).is_ok());
  CHECK(validator.validate("run1progress", entry("a", "x12345", now + 1), now).code() == Code::kRefused);
  p_calls = short_calls = 0;
  CHECK(validator.validate("run1_progress_old", entry("a", "x12345", now + 1), now).is_ok());
  CHECK(validator.validate("run1_metrics", entry("a", "x12345", now + 1), now).is_ok());
  CHECK(p_calls == 0);
  CHECK(short_calls == 0);
}

namespace {

// The schema of a progress record, in the spirit of what the trainer registers.
SchemaCheck progress_schema(bool allow_tombstone = true) {
  return map_schema("progress",
                    {{.name = "epoch", .kind = FieldKind::kCount},
                     {.name = "samples_per_second", .kind = FieldKind::kNumber, .min = 0},
                     {.name = "peer", .kind = FieldKind::kString},
                     {.name = "client_mode", .kind = FieldKind::kBool, .required = false},
                     {.name = "digest", .kind = FieldKind::kBinary, .required = false}},
                    allow_tombstone);
}

// A progress value with every field right; `tweak` then overrides or adds fields.
Bytes progress_value(const std::function<void(wire::MapWriter&)>& tweak = {}, bool with_epoch = true) {
  wire::MapWriter out;
  if (with_epoch) out.put("epoch", std::uint64_t{3});
  out.put("samples_per_second", 12.5).put("peer", "peer-a");
  if (tweak) tweak(out);
  return out.to_bytes();
}

Status check_value(const SchemaCheck& check, Bytes value) {
  RecordEntry e;
  e.subkey = bytes("peer-a");
  e.value = std::move(value);
  e.expiration = 100;
  return check("run1_progress", e);
}

}  // namespace

TEST_CASE("A map schema accepts right-shaped values and names the field it refuses", "[unit][dht]") {
  auto schema = progress_schema();
  CHECK(check_value(schema, progress_value()).is_ok());
  CHECK(check_value(schema, progress_value([](wire::MapWriter& m) {
                      m.put("client_mode", true).put_binary("digest", as_bytes("abc"));
                    })).is_ok());
  // Numbers may be integers, and fields the schema does not know are ignored (newer peers add fields).
  CHECK(check_value(schema, progress_value([](wire::MapWriter& m) { m.put("future_field", "x"); })).is_ok());

  auto refused = [&](const Bytes& value, const std::string& field) {
    Status status = check_value(schema, value);
    INFO("field " << field << ": " << status.to_string());
    CHECK(status.code() == Code::kMalformed);
    CHECK_THAT(status.message(), Contains("'" + field + "'"));
  };
  refused(progress_value({}, false), "epoch");  // missing
  CHECK_THAT(check_value(schema, progress_value({}, false)).message(), Contains("missing"));
  refused(progress_value([](wire::MapWriter& m) { m.put("epoch", "3"); }, false), "epoch");
  refused(progress_value([](wire::MapWriter& m) { m.put("epoch", std::int64_t{-1}); }, false), "epoch");
  // (3.5, not 3.0: msgpack-c packs a double with an integral value as an integer.)
  refused(progress_value([](wire::MapWriter& m) { m.put("epoch", 3.5); }, false), "epoch");
  wire::MapWriter wrong_number;
  wrong_number.put("epoch", std::uint64_t{3}).put("samples_per_second", "fast").put("peer", "peer-a");
  refused(wrong_number.to_bytes(), "samples_per_second");
  wire::MapWriter negative_rate;
  negative_rate.put("epoch", std::uint64_t{3}).put("samples_per_second", -1.0).put("peer", "peer-a");
  refused(negative_rate.to_bytes(), "samples_per_second");
  wire::MapWriter nan_rate;
  nan_rate.put("epoch", std::uint64_t{3}).put("samples_per_second", std::nan("")).put("peer", "peer-a");
  refused(nan_rate.to_bytes(), "samples_per_second");
  wire::MapWriter wrong_peer;
  wrong_peer.put("epoch", std::uint64_t{3}).put("samples_per_second", 1.0).put_binary("peer", as_bytes("peer-a"));
  refused(wrong_peer.to_bytes(), "peer");
  refused(progress_value([](wire::MapWriter& m) { m.put("client_mode", std::uint64_t{1}); }), "client_mode");
  refused(progress_value([](wire::MapWriter& m) { m.put("digest", "abc"); }), "digest");
}

TEST_CASE("A map schema refuses values that are not one msgpack map", "[unit][dht]") {
  auto schema = progress_schema();
  Bytes junk_after = progress_value();
  junk_after.insert(junk_after.end(), {0x01, 0x02, 0x03});
  Status trailing = check_value(schema, junk_after);
  CHECK(trailing.code() == Code::kMalformed);
  CHECK_THAT(trailing.message(), Contains("trailing"));
  CHECK(check_value(schema, bytes("not msgpack \xc1")).code() == Code::kMalformed);
  CHECK(check_value(schema, Bytes{0xa3, 'a', 'b', 'c'}).code() == Code::kMalformed);  // a string, not a map
  Bytes cut = progress_value();
  cut.resize(cut.size() / 2);
  CHECK(check_value(schema, cut).code() == Code::kMalformed);

  // An empty value is a withdrawn record: allowed unless the schema says otherwise.
  CHECK(check_value(schema, Bytes{}).is_ok());
  CHECK(check_value(progress_schema(false), Bytes{}).code() == Code::kMalformed);
}

TEST_CASE("A map schema registered on the validator guards the record family", "[unit][dht]") {
  const double now = 1000;
  RecordValidator validator;
  validator.add_schema("_progress", progress_schema());
  RecordEntry good = entry("peer-a", "", now + 60);
  good.value = progress_value();
  CHECK(validator.validate("run1_progress", good, now).is_ok());
  RecordEntry bad = good;
  bad.value = progress_value({}, false);
  Status status = validator.validate("run1_progress", bad, now);
  CHECK(status.code() == Code::kMalformed);
  CHECK_THAT(status.message(), Contains("record 'run1_progress'") && Contains("'epoch'"));
  CHECK(validator.validate("run1_metrics", bad, now).is_ok());  // another family: not this schema's business
}
