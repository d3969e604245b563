#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "dedloc/dht/routing_table.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;

namespace {

using test::random_id;

// An id whose first bit differs from `self`'s: always in the far half of the id space.
PeerId far_id(const PeerId& self, std::mt19937_64& rng) {
  auto bytes = random_id(rng).bytes();
  bytes[0] = static_cast<std::uint8_t>((bytes[0] & 0x7f) | (~self.bytes()[0] & 0x80));
  return PeerId(bytes);
}

Contact contact(const PeerId& id, double seen = 0) { return {id, "tcp://127.0.0.1:1", seen}; }

}  // namespace

TEST_CASE("XOR distance orders ids and is symmetric", "[unit][dht]") {
  std::mt19937_64 rng(1);
  PeerId a = random_id(rng), b = random_id(rng);
  CHECK(xor_distance(a, b) == xor_distance(b, a));
  CHECK(xor_distance(a, a).is_zero());
  CHECK(closer_to(a, a, b));
  CHECK_FALSE(closer_to(a, b, a));
}

TEST_CASE("A full bucket that covers our id splits, a far one does not", "[unit][dht]") {
  std::mt19937_64 rng(2);
  PeerId self = random_id(rng);
  RoutingTable table(self, 4);
  // Far contacts fill the far half; once it is a full bucket that does not cover us, it stops growing.
  std::vector<PeerId> far;
  for (int i = 0; i < 4; ++i) far.push_back(far_id(self, rng));
  for (const auto& id : far) CHECK_FALSE(table.update(contact(id)).has_value());
  CHECK(table.size() == 4);
  // Near contacts (same first bit as us) force splits while their bucket covers our id.
  for (int i = 0; i < 40; ++i) {
    auto bytes = random_id(rng).bytes();
    bytes[0] = static_cast<std::uint8_t>((bytes[0] & 0x7f) | (self.bytes()[0] & 0x80));
    (void)table.update(contact(PeerId(bytes)));
  }
  CHECK(table.bucket_count() > 2);
  // A fifth far contact: its bucket is full and does not cover us, so the least recently seen is returned
  // for a ping and the newcomer waits as a replacement.
  PeerId newcomer = far_id(self, rng);
  auto to_ping = table.update(contact(newcomer));
  REQUIRE(to_ping.has_value());
  CHECK(to_ping->id == far[0]);
  CHECK_FALSE(table.find(newcomer).has_value());
}

TEST_CASE("A dead contact is evicted and the newest replacement takes its place", "[unit][dht]") {
  std::mt19937_64 rng(3);
  PeerId self = random_id(rng);
  RoutingTable table(self, 2);
  PeerId a = far_id(self, rng), b = far_id(self, rng), c = far_id(self, rng);
  (void)table.update(contact(a, 1));
  (void)table.update(contact(b, 2));
  (void)table.update(contact(a, 3));  // a seen again: b is now the least recently seen
  auto to_ping = table.update(contact(c, 4));
  REQUIRE(to_ping.has_value());
  CHECK(to_ping->id == b);
  table.mark_dead(b);
  CHECK_FALSE(table.find(b).has_value());
  REQUIRE(table.find(c).has_value());
  CHECK(table.find(a).has_value());
}

TEST_CASE("nearest() returns the k closest known contacts in XOR order, never ourselves", "[unit][dht]") {
  std::mt19937_64 rng(4);
  PeerId self = random_id(rng);
  RoutingTable table(self, 20);
  (void)table.update(contact(self));
  std::vector<PeerId> known;
  for (int i = 0; i < 200; ++i) {
    PeerId id = random_id(rng);
    if (!table.update(contact(id)).has_value() && table.find(id)) known.push_back(id);
  }
  CHECK(table.size() == known.size());
  CHECK_FALSE(table.find(self).has_value());
  PeerId target = random_id(rng);
  auto nearest = table.nearest(target, 20);
  REQUIRE(nearest.size() == std::min<size_t>(20, known.size()));
  std::sort(known.begin(), known.end(), [&](const PeerId& x, const PeerId& y) { return closer_to(target, x, y); });
  for (size_t i = 0; i < nearest.size(); ++i) CHECK(nearest[i].id == known[i]);
}
