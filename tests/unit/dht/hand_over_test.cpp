#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "dedloc/dht/hand_over.hpp"
#include "dedloc/dht/routing_table.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using test::numbered_id;
using test::random_id;

TEST_CASE("A replica hands a key to a newcomer that is now among the key's replicas", "[unit][dht]") {
  const PeerId key = numbered_id(0);
  // Nearest to the key by first byte: 1, 2, 3 (us), 4, 5.
  const std::vector<PeerId> known = {numbered_id(1), numbered_id(2), numbered_id(4), numbered_id(5)};
  const PeerId self = numbered_id(3);
  CHECK(hands_over(key, self, numbered_id(0), known, 3));  // the id equal to the key: nearest of all
  CHECK(hands_over(key, self, PeerId(std::array<std::uint8_t, PeerId::kSize>{2, 1}), known, 3));  // third now
  CHECK_FALSE(hands_over(key, self, numbered_id(6), known, 3));  // fourth: not a replica
  CHECK_FALSE(hands_over(key, self, numbered_id(0x80), known, 3));  // far away
  // We were not among the 2 nearest: the replicas hand it over, not us.
  CHECK_FALSE(hands_over(key, self, numbered_id(0), known, 2));
  // The newcomer and ourselves in `known` count for nothing.
  std::vector<PeerId> with_both = known;
  with_both.push_back(self);
  with_both.push_back(numbered_id(0));
  CHECK(hands_over(key, self, numbered_id(0), with_both, 3));
  CHECK_FALSE(hands_over(key, self, self, known, 3));
  CHECK_FALSE(hands_over(key, self, numbered_id(0), known, 0));
}

TEST_CASE("In a small swarm every holder hands every key to a newcomer", "[unit][dht]") {
  std::mt19937_64 rng(5);
  const PeerId self = random_id(rng);
  const std::vector<PeerId> known = {random_id(rng), random_id(rng)};  // fewer than the replicas
  for (int i = 0; i < 50; ++i) CHECK(hands_over(random_id(rng), self, random_id(rng), known, 5));
}

TEST_CASE("With a full view of the swarm, exactly the old replicas hand over, and only to new replicas",
          "[unit][dht]") {
  constexpr size_t kReplicas = 5;
  std::mt19937_64 rng(9);
  std::vector<PeerId> swarm(40);
  for (auto& id : swarm) id = random_id(rng);
  size_t handed = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const PeerId key = random_id(rng);
    const PeerId newcomer = random_id(rng);
    std::vector<PeerId> by_distance = swarm;
    std::sort(by_distance.begin(), by_distance.end(), [&](const PeerId& a, const PeerId& b) { return closer_to(key, a, b); });
    std::vector<PeerId> old_replicas(by_distance.begin(), by_distance.begin() + kReplicas);
    bool newcomer_is_replica = closer_to(key, newcomer, old_replicas.back());
    for (const auto& self : swarm) {
      bool was_replica = std::find(old_replicas.begin(), old_replicas.end(), self) != old_replicas.end();
      bool gives = hands_over(key, self, newcomer, swarm, kReplicas);
      INFO("trial " << trial);
      CHECK(gives == (was_replica && newcomer_is_replica));
      handed += gives;
    }
  }
  // About 500 x 5/41 trials put the newcomer among the replicas, each handed over by all 5 old ones.
  CHECK(handed > 100);
}
