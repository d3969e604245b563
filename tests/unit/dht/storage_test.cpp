#include <catch2/catch.hpp>

#include "dedloc/dht/storage.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;

namespace {

crypto::PeerId key(std::uint8_t n) { return test::numbered_id(n); }

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_CASE("A store is accepted only if it expires later than what is held", "[unit][dht]") {
  Storage storage;
  double now = 1000;
  REQUIRE(storage.store(key(1), std::nullopt, bytes("v1"), now + 10, now).value());
  auto older = storage.store(key(1), std::nullopt, bytes("v0"), now + 5, now);
  REQUIRE_FALSE(older.is_ok());
  CHECK(older.status().code() == Code::kRefused);
  CHECK(storage.get(key(1), now)->value->value == bytes("v1"));
  REQUIRE(storage.store(key(1), std::nullopt, bytes("v2"), now + 20, now).value());
  CHECK(storage.get(key(1), now)->value->value == bytes("v2"));
  CHECK(storage.store(key(2), std::nullopt, bytes("late"), now - 1, now).status().code() == Code::kRefused);
}

TEST_CASE("Values disappear at their expiration and purge frees them", "[unit][dht]") {
  Storage storage;
  REQUIRE(storage.store(key(1), std::nullopt, bytes("v"), 110, 100).value());
  CHECK(storage.get(key(1), 109.9).has_value());
  CHECK_FALSE(storage.get(key(1), 110).has_value());
  // An expired value never blocks a new one, even with an earlier expiration than the old one had.
  REQUIRE(storage.store(key(1), std::nullopt, bytes("new"), 115, 111).value());
  CHECK(storage.get(key(1), 111)->value->value == bytes("new"));
  storage.purge(200);
  CHECK(storage.key_count() == 0);
}

TEST_CASE("Dictionary subkeys each keep their own value and expiration", "[unit][dht]") {
  Storage storage;
  double now = 50;
  REQUIRE(storage.store(key(7), bytes("peer-a"), bytes("epoch 3"), now + 10, now).value());
  REQUIRE(storage.store(key(7), bytes("peer-b"), bytes("epoch 4"), now + 30, now).value());
  CHECK(storage.store(key(7), bytes("peer-a"), bytes("epoch 2"), now + 5, now).status().code() == Code::kRefused);
  auto record = storage.get(key(7), now);
  REQUIRE(record.has_value());
  CHECK(record->subkeys.size() == 2);
  CHECK(record->subkeys.at(bytes("peer-a")).value == bytes("epoch 3"));
  CHECK(record->expiration() == now + 30);
  auto later = storage.get(key(7), now + 20);  // peer-a's entry has expired, peer-b's has not
  REQUIRE(later.has_value());
  CHECK(later->subkeys.size() == 1);
  CHECK(later->subkeys.count(bytes("peer-b")) == 1);
}

TEST_CASE("Storage limits refuse oversized values and too many keys", "[unit][dht]") {
  Storage storage({.max_keys = 2, .max_subkeys_per_key = 1, .max_value_bytes = 8});
  CHECK(storage.store(key(1), std::nullopt, Bytes(9, 0), 10, 0).status().code() == Code::kTooLarge);
  REQUIRE(storage.store(key(1), std::nullopt, bytes("a"), 10, 0).value());
  REQUIRE(storage.store(key(2), bytes("s"), bytes("b"), 10, 0).value());
  CHECK(storage.store(key(3), std::nullopt, bytes("c"), 10, 0).status().code() == Code::kTooLarge);
  CHECK(storage.store(key(2), bytes("t"), bytes("d"), 10, 0).status().code() == Code::kTooLarge);
  // Once the first keys expire there is room again.
  REQUIRE(storage.store(key(3), std::nullopt, bytes("c"), 30, 20).value());
}

TEST_CASE("A plain value and a dictionary replace each other only by outliving the whole record", "[unit][dht]") {
  Storage storage;
  double now = 10;
  REQUIRE(storage.store(key(1), bytes("a"), bytes("x"), 20, now).value());
  REQUIRE(storage.store(key(1), bytes("b"), bytes("y"), 40, now).value());
  // A plain value must outlive the dictionary's latest entry, not just one of them.
  CHECK(storage.store(key(1), std::nullopt, bytes("plain"), 30, now).status().code() == Code::kRefused);
  CHECK(storage.get(key(1), now)->subkeys.size() == 2);
  REQUIRE(storage.store(key(1), std::nullopt, bytes("plain"), 50, now).value());
  auto plain = storage.get(key(1), now);
  REQUIRE(plain.has_value());
  REQUIRE(plain->value.has_value());
  CHECK(plain->value->value == bytes("plain"));
  CHECK(plain->subkeys.empty());
  // And back: a dictionary entry must outlive the plain value.
  CHECK(storage.store(key(1), bytes("a"), bytes("z"), 45, now).status().code() == Code::kRefused);
  CHECK(storage.get(key(1), now)->value.has_value());
  REQUIRE(storage.store(key(1), bytes("a"), bytes("z"), 60, now).value());
  auto dict = storage.get(key(1), now);
  REQUIRE(dict.has_value());
  CHECK_FALSE(dict->value.has_value());
  REQUIRE(dict->subkeys.size() == 1);
  CHECK(dict->subkeys.at(bytes("a")).value == bytes("z"));
}

TEST_CASE("live_keys lists only keys holding something live", "[unit][dht]") {
  Storage storage;
  REQUIRE(storage.store(key(1), std::nullopt, bytes("short"), 20, 0).value());
  REQUIRE(storage.store(key(2), bytes("s"), bytes("long"), 40, 0).value());
  CHECK(storage.live_keys(10) == std::vector<crypto::PeerId>{key(1), key(2)});
  CHECK(storage.live_keys(30) == std::vector<crypto::PeerId>{key(2)});
  CHECK(storage.live_keys(40).empty());
  CHECK(storage.key_count() == 2);  // expired but not yet purged
}

TEST_CASE("Every accepted store takes the storage's next sequence number, and a refused one none", "[unit][dht]") {
  Storage storage;
  const StorageCursor start = storage.cursor();
  CHECK(start.instance != 0);
  CHECK(start.seq == 0);
  CHECK(Storage().cursor().instance != start.instance);  // a storage made anew: earlier cursors mean nothing

  REQUIRE(storage.store(key(1), bytes("a"), bytes("1"), 100, 0).value());
  REQUIRE(storage.store(key(1), bytes("b"), bytes("2"), 100, 0).value());
  REQUIRE(storage.store(key(2), std::nullopt, bytes("3"), 100, 0).value());
  CHECK_FALSE(storage.store(key(1), bytes("a"), bytes("older"), 50, 0).is_ok());
  CHECK(storage.cursor().seq == 3);
  REQUIRE(storage.store(key(1), bytes("a"), bytes("4"), 200, 0).value());  // replaced: a new number

  auto record = storage.get(key(1), 0);
  REQUIRE(record);
  CHECK(record->subkeys.at(bytes("a")).seq == 4);
  CHECK(record->subkeys.at(bytes("b")).seq == 2);
  CHECK(storage.get(key(2), 0)->value->seq == 3);
  CHECK(storage.cursor() == StorageCursor{start.instance, 4});
}

TEST_CASE("Storing the very entry held again succeeds and changes nothing, and another one as old is refused",
          "[unit][dht]") {
  // A request sent again after a lost datagram (net/datagram_rpc.hpp) must not read as a refusal.
  Storage storage;
  const double now = 1000;
  REQUIRE(storage.store(key(1), std::nullopt, bytes("v"), now + 10, now).value());
  const auto seq = storage.cursor().seq;
  auto again = storage.store(key(1), std::nullopt, bytes("v"), now + 10, now);
  REQUIRE(again.is_ok());
  CHECK_FALSE(again.value());
  CHECK(storage.cursor().seq == seq);  // not a new store: readers are not sent it again
  CHECK(storage.store(key(1), std::nullopt, bytes("w"), now + 10, now).status().code() == Code::kRefused);

  REQUIRE(storage.store(key(2), bytes("sub"), bytes("s"), now + 10, now).value());
  auto subkey_again = storage.store(key(2), bytes("sub"), bytes("s"), now + 10, now);
  REQUIRE(subkey_again.is_ok());
  CHECK_FALSE(subkey_again.value());
  CHECK(storage.store(key(2), bytes("sub"), bytes("t"), now + 10, now).status().code() == Code::kRefused);
  // The same value with another signature is another entry (an owner's re-signed value): refused as not newer.
  StoredValue resigned{bytes("s"), now + 10, bytes("sig"), 0};
  CHECK(storage.store(key(2), bytes("sub"), resigned, now).status().code() == Code::kRefused);
}
