#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <random>

#include "dedloc/dht/hand_over.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using test::numbered_id;
using test::random_id;

namespace {

// A table that holds every id given (buckets large enough that none waits in a replacement cache).
RoutingTable table_of(const PeerId& self, const std::vector<PeerId>& ids) {
  RoutingTable table(self, 1000);
  for (const auto& id : ids) table.update({id, "tcp://127.0.0.1:1", 0});
  return table;
}

}  // namespace

TEST_CASE("A replica hands a key to a newcomer that is now among the key's replicas", "[unit][dht]") {
  const PeerId key = numbered_id(0);
  // Nearest to the key by first byte: 1, 2, 3 (us), 4, 5.
  const PeerId self = numbered_id(3);
  const auto table = table_of(self, {numbered_id(1), numbered_id(2), numbered_id(4), numbered_id(5)});
  CHECK(hands_over(table, key, numbered_id(0), 3));  // the id equal to the key: nearest of all
  CHECK(hands_over(table, key, PeerId(std::array<std::uint8_t, PeerId::kSize>{2, 1}), 3));  // third now
  CHECK_FALSE(hands_over(table, key, numbered_id(6), 3));     // fourth: not a replica
  CHECK_FALSE(hands_over(table, key, numbered_id(0x80), 3));  // far away
  // We were not among the 2 nearest: the replicas hand it over, not us.
  CHECK_FALSE(hands_over(table, key, numbered_id(0), 2));
  // The newcomer may be in the table already (it is, once it answered): it does not push us out.
  const auto with_newcomer =
      table_of(self, {numbered_id(0), numbered_id(1), numbered_id(2), numbered_id(4), numbered_id(5)});
  CHECK(hands_over(with_newcomer, key, numbered_id(0), 3));
  CHECK_FALSE(hands_over(table, key, self, 3));
  CHECK_FALSE(hands_over(table, key, numbered_id(0), 0));
}

TEST_CASE("In a small swarm every holder hands every key to a newcomer", "[unit][dht]") {
  std::mt19937_64 rng(5);
  const auto table = table_of(random_id(rng), {random_id(rng), random_id(rng)});  // fewer than the replicas
  for (int i = 0; i < 50; ++i) CHECK(hands_over(table, random_id(rng), random_id(rng), 5));
}

TEST_CASE("With a full view of the swarm, exactly the old replicas hand over, and only to new replicas",
          "[unit][dht]") {
  constexpr size_t kReplicas = 5;
  std::mt19937_64 rng(9);
  std::vector<PeerId> swarm(40);
  for (auto& id : swarm) id = random_id(rng);
  std::vector<RoutingTable> tables;
  for (const auto& self : swarm) tables.push_back(table_of(self, swarm));
  size_t handed = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const PeerId key = random_id(rng);
    const PeerId newcomer = random_id(rng);
    std::vector<PeerId> by_distance = swarm;
    std::sort(by_distance.begin(), by_distance.end(),
              [&](const PeerId& a, const PeerId& b) { return closer_to(key, a, b); });
    std::vector<PeerId> old_replicas(by_distance.begin(), by_distance.begin() + kReplicas);
    bool newcomer_is_replica = closer_to(key, newcomer, old_replicas.back());
    for (size_t i = 0; i < swarm.size(); ++i) {
      bool was_replica = std::find(old_replicas.begin(), old_replicas.end(), swarm[i]) != old_replicas.end();
      bool gives = hands_over(tables[i], key, newcomer, kReplicas);
      INFO("trial " << trial);
      CHECK(gives == (was_replica && newcomer_is_replica));
      handed += gives;
    }
  }
  // About 500 x 5/41 trials put the newcomer among the replicas, each handed over by all 5 old ones.
  CHECK(handed > 100);
}

TEST_CASE("count_nearer counts the contacts nearer than an id, up to a limit, one ignored", "[unit][dht]") {
  const auto table = table_of(numbered_id(9), {numbered_id(1), numbered_id(2), numbered_id(4), numbered_id(5)});
  const PeerId key = numbered_id(0);
  CHECK(table.count_nearer(key, numbered_id(3), 10, PeerId()) == 2);
  CHECK(table.count_nearer(key, numbered_id(6), 10, PeerId()) == 4);
  CHECK(table.count_nearer(key, numbered_id(6), 3, PeerId()) == 3);          // stops at the limit
  CHECK(table.count_nearer(key, numbered_id(6), 10, numbered_id(2)) == 3);   // one ignored
  CHECK(table.count_nearer(key, numbered_id(2), 10, PeerId()) == 1);         // itself not counted
}
