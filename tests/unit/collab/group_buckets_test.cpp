// Moshpit-style group keys (collab/group_buckets.hpp): every peer computes the same buckets from its own
// view of the swarm, clients land only where a leader is, and the split changes from round to round.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "dedloc/collab/group_buckets.hpp"
#include "support/avg_begin.hpp"

using namespace dedloc;
using namespace dedloc::collab;

namespace {

// The lab's volunteer swarm (bench/lab/scenarios/home-volunteers.yaml): 16 public trainers, 40 clients.
std::vector<PeerProgress> swarm(size_t public_peers, size_t clients) {
  std::vector<PeerProgress> records;
  for (size_t i = 0; i < public_peers + clients; ++i) {
    PeerProgress p;
    p.epoch = 17;
    p.peer = "peer" + std::to_string(i * 7919);
    p.client_mode = i >= public_peers;
    records.push_back(p);
  }
  return records;
}

// What each trainer chooses from its own view: everybody else's records.
std::vector<GroupBucket> choices(const std::vector<PeerProgress>& all, const std::string& round, size_t target) {
  std::vector<GroupBucket> chosen;
  for (const auto& me : all) {
    std::vector<PeerProgress> others;
    for (const auto& r : all) {
      if (r.peer != me.peer) others.push_back(r);
    }
    chosen.push_back(choose_group_bucket(round, 17, others, me.peer, true, me.client_mode, target, me.joined_at));
  }
  return chosen;
}

}  // namespace

TEST_CASE("Group buckets: a swarm that fits in one group keeps the plain round", "[unit][collab]") {
  const auto all = swarm(4, 10);
  for (const auto& b : choices(all, "grad.17", 16)) {
    CHECK(b.round == "grad.17");
    CHECK(b.buckets == 1);
    CHECK(b.expected == 14);
  }
  // Only clients: nobody could lead a bucket, so one bucket (aux peers may lead it).
  for (const auto& b : choices(swarm(0, 40), "grad.17", 16)) CHECK(b.buckets == 1);
}

TEST_CASE("Group buckets: 56 trainers split into buckets every member agrees on, each with a leader", "[unit][collab]") {
  const auto all = swarm(16, 40);
  const auto chosen = choices(all, "grad.17", 16);
  std::map<std::string, size_t> members;
  std::map<std::string, size_t> leaders;
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(chosen[i].buckets == 5);  // ceil(56 / 12.8)
    ++members[chosen[i].round];
    if (!all[i].client_mode) ++leaders[chosen[i].round];
  }
  CHECK(members.size() == 5);
  for (size_t i = 0; i < all.size(); ++i) {
    INFO(chosen[i].round);
    CHECK(chosen[i].expected == members[chosen[i].round]);  // what the leader waits for is who comes
    CHECK(leaders[chosen[i].round] >= 1);                   // a client never lands where nobody can lead
    CHECK(chosen[i].expected <= 16);
    CHECK_THAT(chosen[i].round, Catch::StartsWith("grad.17.b"));
  }
}

TEST_CASE("Group buckets: the split changes every round, and a peer missing from a view moves few", "[unit][collab]") {
  const auto all = swarm(16, 40);
  const auto first = choices(all, "grad.17", 16);
  const auto second = choices(all, "grad.18", 16);
  // Pairs that shared a bucket in the first round: most are apart in the second (with 5 buckets, about 1 in 5 stay).
  size_t together = 0, still = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      if (first[i].index != first[j].index) continue;
      ++together;
      still += second[i].index == second[j].index;
    }
  }
  REQUIRE(together > 0);
  CHECK(static_cast<double>(still) / static_cast<double>(together) < 0.5);

  // A view that has not yet seen one client (a joiner): everyone else's bucket stays where it was.
  std::vector<PeerProgress> without_last(all.begin(), all.end() - 1);
  size_t moved = 0;
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    std::vector<PeerProgress> others;
    for (const auto& r : without_last) {
      if (r.peer != all[i].peer) others.push_back(r);
    }
    moved += choose_group_bucket("grad.17", 17, others, all[i].peer, true, all[i].client_mode, 16).index != first[i].index;
  }
  CHECK(moved <= 2);
}

TEST_CASE("Group buckets: an aux peer takes a bucket and counts only the trainers in it", "[unit][collab]") {
  const auto all = swarm(16, 40);
  const auto aux = choose_group_bucket("grad.17", 17, all, "aux-peer-1", /*self_trainer=*/false, false, 16);
  CHECK(aux.buckets == 5);
  size_t there = 0;
  for (const auto& b : choices(all, "grad.17", 16)) there += b.index == aux.index;
  CHECK(aux.expected == there);
}

TEST_CASE("Group buckets: a peer whose epoch stopped (it died, its record lingers) leads no bucket", "[unit][collab]") {
  // The lab's churn run: a bucket whose only leader had been SIGKILLed, its record still listed, and the
  // 7 volunteers put there found nobody looking.
  auto all = swarm(16, 40);
  const auto alive = choices(all, "grad.17", 16);
  for (auto& r : all) {
    if (r.peer == all[3].peer) r.epoch = 14;  // stopped three steps ago
  }
  std::vector<PeerProgress> others(all.begin() + 1, all.end());
  const auto without = choose_group_bucket("grad.17", 17, others, all[0].peer, true, false, 16);
  std::vector<PeerProgress> live;
  for (const auto& r : others) {
    if (r.peer != all[3].peer) live.push_back(r);
  }
  CHECK(without.round == choose_group_bucket("grad.17", 17, live, all[0].peer, true, false, 16).round);
  CHECK(without.expected == choose_group_bucket("grad.17", 17, live, all[0].peer, true, false, 16).expected);
  // One epoch apart (a peer that just stepped, or is about to) still counts.
  all[3].epoch = 18;
  const auto ahead = choose_group_bucket("grad.17", 17, std::vector<PeerProgress>(all.begin() + 1, all.end()), all[0].peer, true, false, 16);
  CHECK(ahead.round == alive[0].round);
}

TEST_CASE("Group buckets: at our step, the bucket's trainers still behind its round are no longer expected",
          "[unit][collab]") {
  // The split is drawn from the records at our last step (epoch 16 -> 17 here); at our step for round 17
  // the records read since show who reached it.
  auto all = swarm(16, 40);
  std::vector<PeerProgress> others(all.begin() + 1, all.end());
  const auto bucket = choose_group_bucket("grad.17", 17, others, all[0].peer, true, false, 16);
  REQUIRE(bucket.buckets == 5);
  REQUIRE(bucket.others.size() + 1 == bucket.expected);  // the others of our bucket, by their subkeys
  for (const auto& peer : bucket.others) {
    CHECK(std::any_of(others.begin(), others.end(), [&](const PeerProgress& r) { return r.peer == peer; }));
    CHECK(peer != all[0].peer);
  }
  CHECK(still_expected(bucket, others, 17) == bucket.expected);  // every one of them is there
  // One of ours still at 16 (killed while computing, its record lingering, or sitting the last round out),
  // one gone from the records altogether, and one already past the round: three fewer to wait for.
  std::vector<PeerProgress> later = others;
  for (auto& r : later) {
    if (r.peer == bucket.others[0]) r.epoch = 16;
    if (r.peer == bucket.others[2]) r.epoch = 18;
  }
  std::erase_if(later, [&](const PeerProgress& r) { return r.peer == bucket.others[1]; });
  CHECK(still_expected(bucket, later, 17) == bucket.expected - 3);
  // ... and which three, with where their records are (what the trainer logs at debug level).
  const auto out = left_out(bucket, later, 17);
  REQUIRE(out.size() == 3);
  CHECK((out[0].peer == bucket.others[0] && out[0].epoch == std::optional<std::uint64_t>(16)));
  CHECK((out[1].peer == bucket.others[1] && !out[1].epoch));
  CHECK((out[2].peer == bucket.others[2] && out[2].epoch == std::optional<std::uint64_t>(18)));
  CHECK(left_out(bucket, others, 17).empty());
  // Trainers of other buckets falling behind change nothing for ours.
  std::vector<PeerProgress> elsewhere = others;
  for (auto& r : elsewhere) {
    if (std::find(bucket.others.begin(), bucket.others.end(), r.peer) == bucket.others.end()) r.epoch = 16;
  }
  CHECK(still_expected(bucket, elsewhere, 17) == bucket.expected);
  // A swarm in one group: the count as it was drawn.
  const auto one = choose_group_bucket("grad.17", 17, std::vector<PeerProgress>(all.begin() + 1, all.begin() + 10),
                                       all[0].peer, true, false, 16);
  REQUIRE(one.buckets == 1);
  CHECK(one.others.empty());
  CHECK(still_expected(one, {}, 17) == one.expected);
}

TEST_CASE("Group buckets: views that count one bucket fewer still put most peers in the same bucket", "[unit][collab]") {
  // During churn, one peer counts 56 trainers (B = 5) while another has not yet seen 8 joiners (48: B = 4).
  const auto all = swarm(16, 40);
  const auto five = choices(all, "grad.17", 16);
  const std::vector<PeerProgress> fewer(all.begin(), all.end() - 8);
  const auto four = choices(fewer, "grad.17", 16);
  size_t same = 0;
  for (size_t i = 0; i < fewer.size(); ++i) {
    CHECK(four[i].buckets == 4);
    same += four[i].round == five[i].round;
  }
  // Those of the fifth bucket (about a fifth) move; of the others, most stay.
  INFO(same << " of " << fewer.size() << " stayed");
  CHECK(same >= fewer.size() / 2);
  CHECK(same < fewer.size());  // (a check that the two views really differ)
}

TEST_CASE("Group buckets: every round's buckets are even, each with a leader, leaving room in the group", "[unit][collab]") {
  // The lab's 16 volunteers (bench/lab/scenarios/volunteers-16.yaml): 4 public trainers and 10 behind NAT,
  // groups of 8, and 2 aux peers that join any bucket. Buckets bounded only by the group's size often
  // held 7 or 8 trainers, and an aux peer then took the place of the last one to come.
  const auto all = swarm(4, 10);
  for (int epoch = 0; epoch < 200; ++epoch) {
    const std::string round = "grad." + std::to_string(epoch);
    const auto chosen = choices(all, round, 8);
    std::map<size_t, size_t> load, leaders;
    for (size_t i = 0; i < all.size(); ++i) {
      REQUIRE(chosen[i].buckets == 3);  // ceil(14 / 6.4)
      ++load[chosen[i].index];
      if (!all[i].client_mode) ++leaders[chosen[i].index];
    }
    INFO(round);
    REQUIRE(load.size() == 3);
    for (const auto& [bucket, trainers] : load) {
      CHECK(trainers <= 6);  // floor(0.8 · 8): two aux peers still fit in a group of 8
      CHECK(leaders[bucket] >= 1);
    }
  }
}

TEST_CASE("Group buckets: newcomers are left out of the split of the round they joined in, by everyone alike", "[unit][collab]") {
  // The lab's 16 volunteers: 10 trainers (B = 2), then a wave of 4 clients that loaded the state at epoch 17.
  // The established peers split round 17 before the newcomers' records came; the newcomers, counting
  // themselves and each other (14 trainers: B = 3), searched under a bucket nobody led and missed the round.
  auto all = swarm(4, 10);
  for (size_t i = 10; i < all.size(); ++i) all[i].joined_at = 17;
  const std::vector<PeerProgress> old_view(all.begin(), all.end() - 4);  // 10 peers: what the others saw
  const auto seen_before = choices(old_view, "grad.17", 8);
  const auto seen_now = choices(all, "grad.17", 8);
  std::map<size_t, size_t> leaders;
  for (size_t i = 0; i < old_view.size(); ++i) {
    REQUIRE(seen_before[i].buckets == 2);
    if (!old_view[i].client_mode) ++leaders[seen_before[i].index];
  }
  for (size_t i = 0; i < all.size(); ++i) {
    INFO("peer " << i);
    CHECK(seen_now[i].buckets == 2);  // not 3: the newcomers count nobody that joined this round
    if (i < old_view.size()) {
      // The established peers' buckets and counts are those they had before the newcomers' records came.
      CHECK(seen_now[i].round == seen_before[i].round);
      CHECK(seen_now[i].expected == seen_before[i].expected);
    } else {
      CHECK(leaders[seen_now[i].index] >= 1);  // a newcomer that cannot lead goes where somebody leads
      // It expects the established peers of its bucket, and itself.
      const auto there = std::count_if(seen_before.begin(), seen_before.end(),
                                       [&](const GroupBucket& b) { return b.index == seen_now[i].index; });
      CHECK(seen_now[i].expected == static_cast<size_t>(there) + 1);
    }
  }
  // A swarm of newcomers only (every trainer downloaded in this round, from a donor that left) counts them
  // all, as a swarm without newcomers would.
  std::vector<PeerProgress> fresh = swarm(4, 10);
  const auto plain = choices(fresh, "grad.17", 8);
  for (auto& r : fresh) r.joined_at = 17;
  const auto all_new = choices(fresh, "grad.17", 8);
  for (size_t i = 0; i < fresh.size(); ++i) {
    CHECK(all_new[i].buckets == 3);
    CHECK(all_new[i].round == plain[i].round);
    CHECK(all_new[i].expected == plain[i].expected);
  }
}

TEST_CASE("Group buckets: the round after they joined counts the newcomers, everyone alike", "[unit][collab]") {
  auto all = swarm(4, 10);
  for (size_t i = 10; i < all.size(); ++i) all[i].joined_at = 17;
  std::vector<PeerProgress> next = all;
  for (auto& r : next) r.epoch = 18;
  std::vector<GroupBucket> chosen;
  for (const auto& me : next) {
    std::vector<PeerProgress> others;
    for (const auto& r : next) {
      if (r.peer != me.peer) others.push_back(r);
    }
    chosen.push_back(choose_group_bucket("grad.18", 18, others, me.peer, true, me.client_mode, 8, me.joined_at));
  }
  std::map<std::string, size_t> members;
  for (const auto& b : chosen) {
    CHECK(b.buckets == 3);  // ceil(14 / 6.4)
    ++members[b.round];
  }
  for (const auto& b : chosen) CHECK(b.expected == members[b.round]);
}

TEST_CASE("Group buckets: the carrier is the node that reduces the most, passing over one our round found dead",
          "[unit][collab]") {
  const wire::AvgBegin begin = test::begin_of(
      {{avg::AvgRole::kClient, 0}, {avg::AvgRole::kNode, 5}, {avg::AvgRole::kAux, 9}, {avg::AvgRole::kNode, 6}}, 20, 4);
  const auto ids = begin.ids;
  auto group = avg::Group::from_begin(begin);
  REQUIRE(group.is_ok());
  // The aux peer reduces the most, but carries nothing (it has no bucket to bring): the larger node's share.
  CHECK(collab::bucket_carrier(*group) == std::optional<size_t>(3));
  // It died in our round: the next node carries.
  CHECK(collab::bucket_carrier(*group, {ids[3]}) == std::optional<size_t>(1));
  // Someone else dead changes nothing.
  CHECK(collab::bucket_carrier(*group, {ids[0], ids[2]}) == std::optional<size_t>(3));
  // No node left: nobody can carry.
  CHECK_FALSE(collab::bucket_carrier(*group, {ids[1], ids[3]}).has_value());
}
