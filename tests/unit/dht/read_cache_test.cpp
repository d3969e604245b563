// What a node keeps between latest-value reads (lib/dedloc/dht/read_cache.hpp): entries merged by
// expiration, replicas' cursors, expiry and bounds.
#include <catch2/catch.hpp>

#include "dedloc/dht/read_cache.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;

namespace {

crypto::PeerId id(std::uint8_t n) { return test::numbered_id(n); }

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

wire::RecordEntry entry(const std::string& subkey, const std::string& value, double expiration) {
  return {bytes(subkey), bytes(value), expiration, bytes("signature")};
}

}  // namespace

TEST_CASE("Read cache: a key read before gives back its entries and the replicas' cursors", "[unit][dht]") {
  ReadCache cache;
  CHECK(cache.begin(id(1), 0).entries.empty());
  CHECK(cache.begin(id(1), 0).cursors.empty());

  cache.end(id(1), {entry("a", "1", 100), entry("b", "2", 100)}, {{id(7), {11, 5}}, {id(8), {12, 9}}}, 0);
  auto view = cache.begin(id(1), 0);
  REQUIRE(view.entries.size() == 2);
  CHECK(view.entries[0].value == bytes("1"));
  CHECK(view.entries[0].signature.empty());  // checked when it came; never sent on
  CHECK(view.cursors.at(id(7)) == StorageCursor{11, 5});
  CHECK(view.cursors.at(id(8)) == StorageCursor{12, 9});
  CHECK(cache.begin(id(2), 0).entries.empty());  // per key
}

TEST_CASE("Read cache: reads that end together merge, entries by expiration and cursors by sequence", "[unit][dht]") {
  ReadCache cache;
  cache.end(id(1), {entry("a", "new", 200), entry("b", "b", 100)}, {{id(7), {11, 9}}}, 0);
  // A read that began earlier ends later, with an older "a" and an older cursor at replica 7.
  cache.end(id(1), {entry("a", "old", 150), entry("c", "c", 100)}, {{id(7), {11, 5}}, {id(8), {12, 3}}}, 0);
  auto view = cache.begin(id(1), 0);
  REQUIRE(view.entries.size() == 3);
  CHECK(view.entries[0].value == bytes("new"));
  CHECK(view.cursors.at(id(7)) == StorageCursor{11, 9});
  CHECK(view.cursors.at(id(8)) == StorageCursor{12, 3});
  // Replica 7 restarted: its new storage's cursor replaces the old one, whatever the numbers.
  cache.end(id(1), {}, {{id(7), {99, 1}}}, 0);
  CHECK(cache.begin(id(1), 0).cursors.at(id(7)) == StorageCursor{99, 1});
}

TEST_CASE("Read cache: entries expire as a replica's do", "[unit][dht]") {
  ReadCache cache;
  cache.end(id(1), {entry("a", "1", 100), entry("b", "2", 300), entry("gone", "3", 40)}, {}, 50);
  CHECK(cache.begin(id(1), 50).entries.size() == 2);  // "gone" had expired when the read ended
  auto later = cache.begin(id(1), 100);
  REQUIRE(later.entries.size() == 1);
  CHECK(later.entries[0].subkey == bytes("b"));
}

TEST_CASE("Read cache: bounded in keys (the least recently read goes) and in cursors per key", "[unit][dht]") {
  ReadCache cache(/*max_keys=*/2, /*max_cursors=*/2);
  cache.end(id(1), {entry("a", "1", 100)}, {}, 0);
  cache.end(id(2), {entry("a", "2", 100)}, {}, 0);
  CHECK(cache.begin(id(1), 0).entries.size() == 1);  // key 1 read again: key 2 is now the oldest
  cache.end(id(3), {entry("a", "3", 100)}, {}, 0);
  CHECK(cache.keys() == 2);
  CHECK(cache.begin(id(2), 0).entries.empty());
  CHECK(cache.begin(id(1), 0).entries.size() == 1);
  CHECK(cache.begin(id(3), 0).entries.size() == 1);

  cache.end(id(1), {}, {{id(7), {1, 30}}, {id(8), {1, 10}}, {id(9), {1, 20}}}, 0);
  auto view = cache.begin(id(1), 0);
  CHECK(view.cursors.size() == 2);
  CHECK(view.cursors.count(id(8)) == 0);  // the lowest goes: that replica sends everything once more
}
