// The sans-IO iterative lookup (lookup.hpp): fed candidates, answers and failures by hand or by a simulated
// network of routing tables; no sockets; time from a ManualClock where stalls matter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <random>
#include <set>

#include "dedloc/core/clock.hpp"
#include "dedloc/dht/lookup.hpp"
#include "dedloc/dht/routing_table.hpp"
#include "support/random_ids.hpp"

using namespace dedloc;
using namespace dedloc::dht;
using namespace std::chrono_literals;

namespace {

using test::random_id;

// The id at XOR distance `distance` (as the last byte, `high` as the first) from `target`.
PeerId at_distance(const PeerId& target, std::uint8_t distance, std::uint8_t high = 0) {
  auto bytes = target.bytes();
  bytes[0] ^= high;
  bytes[PeerId::kSize - 1] ^= distance;
  return PeerId(bytes);
}

Contact contact(const PeerId& id) { return {id, "tcp://10.0.0.1:" + id.short_string(), 0}; }

std::vector<PeerId> ids_of(const std::vector<Contact>& contacts) {
  std::vector<PeerId> ids;
  for (const auto& c : contacts) ids.push_back(c.id);
  return ids;
}

}  // namespace

TEST_CASE("A lookup asks the nearest candidates first, at most alpha at a time", "[unit][dht]") {
  std::mt19937_64 rng(1);
  PeerId target = random_id(rng);
  PeerId self = at_distance(target, 0, 0x80);
  // Seeds at distances 10..70, given in scrambled order.
  std::vector<Contact> seeds;
  for (int d : {50, 20, 70, 10, 40, 30, 60}) {
    seeds.push_back(contact(at_distance(target, static_cast<std::uint8_t>(d))));
  }
  Lookup lookup(target, self, seeds, {.k = 3, .alpha = 2});

  auto first = lookup.next_queries();
  CHECK(ids_of(first) == std::vector<PeerId>{at_distance(target, 10), at_distance(target, 20)});
  CHECK(lookup.in_flight() == 2);
  CHECK(lookup.next_queries().empty());  // alpha are in flight
  CHECK_FALSE(lookup.done());

  // An answer frees one slot: the next nearest is asked, and only it.
  lookup.on_answer(at_distance(target, 10), {});
  auto second = lookup.next_queries();
  CHECK(ids_of(second) == std::vector<PeerId>{at_distance(target, 30)});
  CHECK(lookup.in_flight() == 2);

  // An answer that brings nearer contacts: they go before everything already known.
  lookup.on_answer(at_distance(target, 20), {contact(at_distance(target, 5)), contact(at_distance(target, 2))});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{at_distance(target, 2)});
  lookup.on_answer(at_distance(target, 30), {});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{at_distance(target, 5)});
  CHECK_FALSE(lookup.done());
  lookup.on_answer(at_distance(target, 2), {});
  lookup.on_answer(at_distance(target, 5), {});
  // The 3 nearest (2, 5, 10) have answered: done, although 20 and 30 answered too and 40.. were never asked.
  CHECK(lookup.done());
  CHECK(ids_of(lookup.nearest_answered(3)) ==
        std::vector<PeerId>{at_distance(target, 2), at_distance(target, 5), at_distance(target, 10)});
  CHECK(lookup.nearest_answered(10).size() == 5);
  CHECK(lookup.next_queries().empty());  // nothing nearer is left to ask
}

TEST_CASE("A lookup is done once the k nearest have answered, even with farther ones in flight", "[unit][dht]") {
  std::mt19937_64 rng(2);
  PeerId target = random_id(rng), self = random_id(rng);
  PeerId a = at_distance(target, 1), b = at_distance(target, 2), c = at_distance(target, 3),
         d = at_distance(target, 4), e = at_distance(target, 5);
  Lookup lookup(target, self, {contact(e), contact(d), contact(c)}, {.k = 2, .alpha = 3});
  // Only the k nearest live candidates are worth asking: c and d, not e.
  auto first = ids_of(lookup.next_queries());
  CHECK(first == std::vector<PeerId>{c, d});
  lookup.on_answer(c, {contact(a), contact(b)});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{a, b});
  CHECK(lookup.in_flight() == 3);
  lookup.on_answer(b, {});
  CHECK_FALSE(lookup.done());  // a, nearer than b, has not answered yet
  lookup.on_answer(a, {});
  CHECK(lookup.done());  // d is still in flight, but it is not among the 2 nearest
  CHECK(lookup.in_flight() == 1);
  CHECK(ids_of(lookup.nearest_answered(2)) == std::vector<PeerId>{a, b});
  CHECK(ids_of(lookup.nearest_answered(5)) == std::vector<PeerId>{a, b, c});
}

TEST_CASE("A failed node is not among the nearest and the lookup moves past it", "[unit][dht]") {
  std::mt19937_64 rng(3);
  PeerId target = random_id(rng), self = random_id(rng);
  PeerId a = at_distance(target, 1), b = at_distance(target, 2), c = at_distance(target, 3),
         d = at_distance(target, 4);
  Lookup lookup(target, self, {contact(a), contact(b), contact(c), contact(d)}, {.k = 2, .alpha = 1});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{a});
  lookup.on_failure(a);
  CHECK(lookup.in_flight() == 0);
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{b});
  lookup.on_answer(b, {contact(a)});  // a stale table still names the dead node: it is not asked again
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{c});
  CHECK_FALSE(lookup.done());
  lookup.on_answer(c, {});
  CHECK(lookup.done());
  CHECK(ids_of(lookup.nearest_answered(2)) == std::vector<PeerId>{b, c});
  // A late answer from the failed node changes nothing.
  lookup.on_answer(a, {contact(at_distance(target, 0))});
  CHECK(ids_of(lookup.nearest_answered(4)) == std::vector<PeerId>{b, c});
  CHECK(lookup.next_queries().empty());
}

TEST_CASE("A lookup whose every candidate fails is done with nothing", "[unit][dht]") {
  std::mt19937_64 rng(4);
  PeerId target = random_id(rng), self = random_id(rng);
  std::vector<Contact> seeds;
  for (int i = 0; i < 5; ++i) seeds.push_back(contact(random_id(rng)));
  Lookup lookup(target, self, seeds, {.k = 3, .alpha = 2});
  size_t asked = 0;
  for (auto batch = lookup.next_queries(); !batch.empty(); batch = lookup.next_queries()) {
    CHECK_FALSE(lookup.done());
    for (const auto& c : batch) lookup.on_failure(c.id);
    asked += batch.size();
  }
  CHECK(asked == 5);
  CHECK(lookup.done());
  CHECK(lookup.nearest_answered(3).empty());

  Lookup empty(target, self, {}, {});
  CHECK(empty.done());
  CHECK(empty.next_queries().empty());
}

TEST_CASE("A lookup never asks itself, client-mode contacts, or contacts from unasked nodes", "[unit][dht]") {
  std::mt19937_64 rng(5);
  PeerId target = random_id(rng);
  PeerId self = at_distance(target, 1), a = at_distance(target, 2), b = at_distance(target, 3);
  Contact client{at_distance(target, 0), "", 0};  // nearest of all, but cannot be dialled
  Lookup lookup(target, self, {contact(self), client, contact(a)}, {.k = 4, .alpha = 4});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{a});
  // Someone never asked "answers" with a contact: ignored (answers are only accepted from those asked).
  lookup.on_answer(at_distance(target, 9), {contact(b)});
  CHECK(lookup.next_queries().empty());
  lookup.on_answer(a, {contact(self), client, contact(b)});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{b});
  lookup.on_answer(b, {});
  CHECK(lookup.done());
  CHECK(ids_of(lookup.nearest_answered(4)) == std::vector<PeerId>{a, b});
}

TEST_CASE("Hostile answers cannot make a lookup remember more than max_candidates", "[unit][dht]") {
  std::mt19937_64 rng(6);
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  PeerId first = at_distance(target, 1);
  Lookup lookup(target, self, {contact(first)}, {.k = 100, .alpha = 100, .max_candidates = 4});
  REQUIRE(ids_of(lookup.next_queries()) == std::vector<PeerId>{first});
  // 50 contacts at distances 250, 245, ... 5 (farthest first): only the nearest three fit beside `first`.
  std::vector<Contact> flood;
  for (int d = 250; d >= 5; d -= 5) flood.push_back(contact(at_distance(target, static_cast<std::uint8_t>(d))));
  lookup.on_answer(first, flood);
  auto asked = lookup.next_queries();
  CHECK(ids_of(asked) ==
        std::vector<PeerId>{at_distance(target, 5), at_distance(target, 10), at_distance(target, 15)});
}

TEST_CASE("A lookup full of failed candidates still takes nearer newcomers", "[unit][dht]") {
  std::mt19937_64 rng(8);
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  PeerId first = at_distance(target, 1), second = at_distance(target, 20);
  Lookup lookup(target, self, {contact(first), contact(second)}, {.k = 5, .alpha = 100, .max_candidates = 5});
  REQUIRE(lookup.next_queries().size() == 2);
  // A hostile answer fills the list with dead ids close to the target; they all fail.
  std::vector<Contact> dead;
  for (int d : {2, 3, 4}) dead.push_back(contact(at_distance(target, static_cast<std::uint8_t>(d))));
  lookup.on_answer(first, dead);
  auto asked = lookup.next_queries();
  REQUIRE(asked.size() == 3);
  for (const auto& c : asked) lookup.on_failure(c.id);
  // A real node, farther than every dead one, must still get in and be asked.
  PeerId real = at_distance(target, 9);
  lookup.on_answer(second, {contact(real)});
  CHECK(ids_of(lookup.next_queries()) == std::vector<PeerId>{real});
}

namespace {

// A synthetic network: every node's routing table has seen every other node (so, by Kademlia's split rule,
// each knows its own neighbourhood in full and far regions only by a sample). An answer is the answering
// node's `k` nearest contacts to the target; dead nodes never answer but stay in others' tables.
struct Network {
  std::vector<PeerId> ids;
  std::map<PeerId, RoutingTable> tables;
  std::set<PeerId> dead;

  Network(size_t size, size_t bucket_size, std::mt19937_64& rng) {
    for (size_t i = 0; i < size; ++i) ids.push_back(random_id(rng));
    for (const auto& id : ids) {
      RoutingTable table(id, bucket_size);
      std::vector<PeerId> others = ids;
      std::shuffle(others.begin(), others.end(), rng);
      for (const auto& other : others) {
        if (other != id) (void)table.update(contact(other));
      }
      tables.emplace(id, std::move(table));
    }
  }

  // The true `count` nearest live nodes to `target`, `self` excluded.
  std::vector<PeerId> nearest_live(const PeerId& target, const PeerId& self, size_t count) const {
    std::vector<PeerId> live;
    for (const auto& id : ids) {
      if (id != self && !dead.contains(id)) live.push_back(id);
    }
    std::sort(live.begin(), live.end(), [&](const PeerId& x, const PeerId& y) { return closer_to(target, x, y); });
    live.resize(std::min(live.size(), count));
    return live;
  }
};

struct RunStats {
  size_t queries = 0;
  size_t max_in_flight = 0;
  std::set<PeerId> asked;
  std::set<PeerId> heard;  // every id the lookup was told of: seeds and answers
};

// Runs `lookup` from `seeds` to the end, answering the oldest request in flight each step (so several stay
// in flight).
RunStats run(Lookup& lookup, const std::vector<Contact>& seeds, const Network& net, size_t k, size_t alpha) {
  RunStats stats;
  for (const auto& c : seeds) stats.heard.insert(c.id);
  std::deque<PeerId> pending;
  while (!lookup.done()) {
    for (const auto& c : lookup.next_queries()) {
      CHECK(stats.asked.insert(c.id).second);  // nobody is asked twice
      pending.push_back(c.id);
      ++stats.queries;
    }
    stats.max_in_flight = std::max(stats.max_in_flight, lookup.in_flight());
    REQUIRE(lookup.in_flight() <= alpha);
    REQUIRE(lookup.in_flight() == pending.size());
    if (pending.empty()) break;  // nobody left to ask
    PeerId from = pending.front();
    pending.pop_front();
    if (net.dead.contains(from)) {
      lookup.on_failure(from);
    } else {
      auto answer = net.tables.at(from).nearest(lookup.target(), k);
      for (const auto& c : answer) stats.heard.insert(c.id);
      lookup.on_answer(from, answer);
    }
  }
  return stats;
}

}  // namespace

TEST_CASE("Lookups over a simulated network converge to the true k nearest", "[unit][dht]") {
  std::mt19937_64 rng(7);
  const size_t k = 8, alpha = 3;
  Network net(200, k, rng);
  for (int trial = 0; trial < 20; ++trial) {
    PeerId self = net.ids[rng() % net.ids.size()];
    PeerId target = random_id(rng);
    // Start from what self's own table knows, as a node does.
    auto seeds = net.tables.at(self).nearest(target, alpha);
    Lookup lookup(target, self, seeds, {.k = k, .alpha = alpha});
    RunStats stats = run(lookup, seeds, net, k, alpha);
    INFO("trial " << trial << ", target " << target.to_string());
    REQUIRE(lookup.done());
    CHECK(ids_of(lookup.nearest_answered(k)) == net.nearest_live(target, self, k));
    CHECK(stats.max_in_flight == alpha);
    CHECK_FALSE(stats.asked.contains(self));
    CHECK(stats.queries < net.ids.size() / 2);  // a lookup, not a flood
  }
}

TEST_CASE("Lookups over a simulated network route around dead nodes", "[unit][dht]") {
  std::mt19937_64 rng(8);
  const size_t k = 8, alpha = 3;
  Network net(200, k, rng);
  for (int trial = 0; trial < 20; ++trial) {
    net.dead.clear();
    PeerId self = net.ids[rng() % net.ids.size()];
    PeerId target = random_id(rng);
    // A quarter of the network is dead, the three true nearest among them; the tables still list them.
    auto dead_nearest = net.nearest_live(target, self, 3);
    net.dead.insert(dead_nearest.begin(), dead_nearest.end());
    for (const auto& id : net.ids) {
      if (id != self && rng() % 4 == 0) net.dead.insert(id);
    }
    auto seeds = net.tables.at(self).nearest(target, k);
    Lookup lookup(target, self, seeds, {.k = k, .alpha = alpha});
    RunStats stats = run(lookup, seeds, net, k, alpha);
    INFO("trial " << trial << ", target " << target.to_string());
    REQUIRE(lookup.done());
    auto found = ids_of(lookup.nearest_answered(k));
    REQUIRE_FALSE(found.empty());
    for (const auto& id : found) CHECK_FALSE(net.dead.contains(id));
    // Exactly the k nearest live nodes of all it heard of. (Not always the network's true k nearest live, nor
    // always k: stale tables fill some of their k answer slots with dead entries, so farther live nodes may
    // go unnamed.)
    std::vector<PeerId> expected;
    for (const auto& id : stats.heard) {
      if (id != self && !net.dead.contains(id)) expected.push_back(id);
    }
    std::sort(expected.begin(), expected.end(),
              [&](const PeerId& x, const PeerId& y) { return closer_to(target, x, y); });
    expected.resize(std::min(expected.size(), k));
    CHECK(found == expected);
    // The dead nearest were named by the others, tried, failed, and passed over.
    for (const auto& id : dead_nearest) CHECK(stats.asked.contains(id));
  }
}

TEST_CASE("A query unanswered past stall_after gives its slot away and is not waited for", "[unit][dht]") {
  std::mt19937_64 rng(9);
  ManualClock clock;
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  auto d = [&](int distance) { return at_distance(target, static_cast<std::uint8_t>(distance)); };
  std::vector<Contact> seeds;
  for (int distance : {10, 20, 30, 40, 50, 60}) seeds.push_back(contact(d(distance)));
  Lookup lookup(target, self, seeds, {.k = 3, .alpha = 2, .stall_after = 500ms});

  CHECK(ids_of(lookup.next_queries(clock.now())) == std::vector<PeerId>{d(10), d(20)});
  CHECK(lookup.next_stall() == clock.now() + 500ms);
  clock.advance(499ms);
  CHECK(lookup.stall_overdue(clock.now()).empty());
  CHECK(lookup.next_queries(clock.now()).empty());  // both slots still held
  clock.advance(1ms);
  // 10 and 20 are silent: their slots go to 30 and 40, and the lookup stops counting on them.
  CHECK(lookup.stall_overdue(clock.now()) == std::vector<PeerId>{d(10), d(20)});
  CHECK(lookup.in_flight() == 0);
  CHECK(lookup.stalled() == 2);
  CHECK(ids_of(lookup.next_queries(clock.now())) == std::vector<PeerId>{d(30), d(40)});
  clock.advance(10ms);
  lookup.on_answer(d(30), {});
  lookup.on_answer(d(40), {});
  CHECK_FALSE(lookup.done());  // only two answered: the third nearest responsive one is asked next
  CHECK(ids_of(lookup.next_queries(clock.now())) == std::vector<PeerId>{d(50)});
  // A stalled query that answers after all still counts, and what it names is asked.
  lookup.on_answer(d(20), {contact(d(15))});
  CHECK(lookup.stalled() == 1);
  CHECK(ids_of(lookup.next_queries(clock.now())) == std::vector<PeerId>{d(15)});
  lookup.on_answer(d(50), {});
  lookup.on_answer(d(15), {});
  // Three nearest responsive (15, 20, 30) answered: done, without waiting for 10 (its RPC deadline is far).
  CHECK(lookup.done());
  CHECK(ids_of(lookup.nearest_answered(3)) == std::vector<PeerId>{d(15), d(20), d(30)});
  // Its failure, when it comes, changes nothing.
  lookup.on_failure(d(10));
  CHECK(lookup.stalled() == 0);
  CHECK(lookup.done());
}

TEST_CASE("Stalled queries are waited for a second stall time while fewer than k nodes have answered", "[unit][dht]") {
  std::mt19937_64 rng(10);
  ManualClock clock;
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  PeerId a = at_distance(target, 1), b = at_distance(target, 2);
  const TimePoint asked = clock.now();
  Lookup lookup(target, self, {contact(a), contact(b)}, {.k = 3, .alpha = 2, .stall_after = 500ms});
  REQUIRE(lookup.next_queries(clock.now()).size() == 2);
  clock.advance(5ms);
  lookup.on_answer(b, {});
  clock.advance(500ms);
  CHECK(lookup.stall_overdue(clock.now()) == std::vector<PeerId>{a});
  // Nobody left to ask, one answer of three wanted: the slow node may be all there is (a small or an
  // overloaded swarm), so the lookup still waits for it, for one more stall time.
  CHECK(lookup.next_queries(clock.now()).empty());
  CHECK_FALSE(lookup.done());
  CHECK(lookup.next_stall() == asked + 1000ms);
  lookup.on_answer(a, {});
  CHECK(lookup.done());
  CHECK(ids_of(lookup.nearest_answered(3)) == std::vector<PeerId>{a, b});

  // The same with a failure instead of a late answer.
  Lookup failing(target, self, {contact(a), contact(b)}, {.k = 3, .alpha = 2, .stall_after = 500ms});
  REQUIRE(failing.next_queries(clock.now()).size() == 2);
  failing.on_answer(b, {});
  clock.advance(500ms);
  REQUIRE(failing.stall_overdue(clock.now()).size() == 1);
  CHECK_FALSE(failing.done());
  failing.on_failure(a);
  CHECK(failing.done());

  // Silent past the second stall time: given up, so a swarm smaller than k does not pay a dead node's RPC
  // deadline on every lookup. Not returned again: it was reported when it stalled.
  const TimePoint asked_dead = clock.now();
  Lookup dead(target, self, {contact(a), contact(b)}, {.k = 3, .alpha = 2, .stall_after = 500ms});
  REQUIRE(dead.next_queries(clock.now()).size() == 2);
  dead.on_answer(b, {});
  clock.advance(500ms);
  REQUIRE(dead.stall_overdue(clock.now()).size() == 1);
  clock.advance(499ms);
  CHECK(dead.stall_overdue(clock.now()).empty());
  CHECK_FALSE(dead.done());
  clock.advance(1ms);
  CHECK(dead.next_stall() == asked_dead + 1000ms);
  CHECK(dead.stall_overdue(clock.now()).empty());
  CHECK(dead.done());
  CHECK(dead.next_stall() == TimePoint::max());
  CHECK(ids_of(dead.nearest_answered(3)) == std::vector<PeerId>{b});

  // With no answer at all, nothing is given up: the stalled ones are all there is.
  Lookup silent(target, self, {contact(a), contact(b)}, {.k = 3, .alpha = 2, .stall_after = 500ms});
  REQUIRE(silent.next_queries(clock.now()).size() == 2);
  clock.advance(500ms);
  REQUIRE(silent.stall_overdue(clock.now()).size() == 2);
  clock.advance(10s);
  CHECK(silent.stall_overdue(clock.now()).empty());
  CHECK_FALSE(silent.done());
  CHECK(silent.next_stall() == TimePoint::max());  // wait for an answer or a failure
}

TEST_CASE("A suspect is not waited for once some node answered, even with fewer than k answers", "[unit][dht]") {
  std::mt19937_64 rng(14);
  ManualClock clock;
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  PeerId suspect = at_distance(target, 1), b = at_distance(target, 2);
  Lookup lookup(target, self, {contact(suspect), contact(b)}, {.k = 5, .alpha = 2, .stall_after = 500ms});
  lookup.suspect(suspect);
  REQUIRE(lookup.next_queries(clock.now()).size() == 2);
  CHECK_FALSE(lookup.done());  // no answer yet: the suspect may be all there is
  clock.advance(3ms);
  lookup.on_answer(b, {});
  CHECK(lookup.done());
}

TEST_CASE("A value lookup waits for a stalled query among its k nearest, but not for a suspect", "[unit][dht]") {
  // The nearest nodes hold the value: a holder that is merely slow (a loaded machine) must not be passed over
  // for farther nodes that answer fast, or a get misses a record that is there.
  std::mt19937_64 rng(12);
  ManualClock clock;
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  auto d = [&](int distance) { return at_distance(target, static_cast<std::uint8_t>(distance)); };
  std::vector<Contact> seeds;
  for (int distance : {10, 20, 30, 40}) seeds.push_back(contact(d(distance)));
  const LookupOptions options{.k = 2, .alpha = 2, .stall_after = 500ms, .wait_for_nearest = true};

  Lookup slow_holder(target, self, seeds, options);
  CHECK(ids_of(slow_holder.next_queries(clock.now())) == std::vector<PeerId>{d(10), d(20)});
  clock.advance(500ms);
  CHECK(slow_holder.stall_overdue(clock.now()) == std::vector<PeerId>{d(10), d(20)});
  CHECK(ids_of(slow_holder.next_queries(clock.now())) == std::vector<PeerId>{d(30), d(40)});
  slow_holder.on_answer(d(30), {});
  slow_holder.on_answer(d(40), {});
  slow_holder.on_answer(d(20), {});
  // Two answered (k), but 10, nearer than both of the k nearest answers, may still answer: wait for it.
  CHECK_FALSE(slow_holder.done());
  slow_holder.on_answer(d(10), {});
  CHECK(slow_holder.done());
  CHECK(ids_of(slow_holder.nearest_answered(2)) == std::vector<PeerId>{d(10), d(20)});

  // Its failure (the RPC deadline) ends the wait too.
  Lookup dead_holder(target, self, seeds, options);
  REQUIRE(dead_holder.next_queries(clock.now()).size() == 2);
  clock.advance(500ms);
  REQUIRE(dead_holder.stall_overdue(clock.now()).size() == 2);
  REQUIRE(dead_holder.next_queries(clock.now()).size() == 2);
  dead_holder.on_answer(d(20), {});
  dead_holder.on_answer(d(30), {});
  dead_holder.on_answer(d(40), {});
  CHECK_FALSE(dead_holder.done());
  dead_holder.on_failure(d(10));
  CHECK(dead_holder.done());

  // ... and so does a second stall time of silence.
  Lookup silent_holder(target, self, seeds, options);
  REQUIRE(silent_holder.next_queries(clock.now()).size() == 2);
  clock.advance(500ms);
  REQUIRE(silent_holder.stall_overdue(clock.now()).size() == 2);
  REQUIRE(silent_holder.next_queries(clock.now()).size() == 2);
  silent_holder.on_answer(d(20), {});
  silent_holder.on_answer(d(30), {});
  silent_holder.on_answer(d(40), {});
  clock.advance(499ms);
  silent_holder.stall_overdue(clock.now());
  CHECK_FALSE(silent_holder.done());
  clock.advance(1ms);
  silent_holder.stall_overdue(clock.now());
  CHECK(silent_holder.done());

  // A node that failed before (a suspect) is asked, but a value lookup does not wait for it either.
  Lookup with_suspect(target, self, seeds, options);
  with_suspect.suspect(d(10));
  CHECK(ids_of(with_suspect.next_queries(clock.now())) == std::vector<PeerId>{d(10), d(20), d(30)});
  with_suspect.on_answer(d(20), {});
  with_suspect.on_answer(d(30), {});
  CHECK(with_suspect.done());

  // Without wait_for_nearest (node lookups: joins, refreshes, stores), the stalled nearest is not waited for.
  Lookup node_lookup(target, self, seeds, {.k = 2, .alpha = 2, .stall_after = 500ms});
  REQUIRE(node_lookup.next_queries(clock.now()).size() == 2);
  clock.advance(500ms);
  REQUIRE(node_lookup.stall_overdue(clock.now()).size() == 2);
  REQUIRE(node_lookup.next_queries(clock.now()).size() == 2);
  node_lookup.on_answer(d(20), {});
  node_lookup.on_answer(d(30), {});
  node_lookup.on_answer(d(40), {});
  CHECK(node_lookup.done());
}

TEST_CASE("A suspect is asked beside the others but never waited for", "[unit][dht]") {
  std::mt19937_64 rng(11);
  ManualClock clock;
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  PeerId suspect = at_distance(target, 1), b = at_distance(target, 2), c = at_distance(target, 3);
  Lookup lookup(target, self, {contact(suspect), contact(b), contact(c)}, {.k = 2, .alpha = 1, .stall_after = 500ms});
  lookup.suspect(suspect);
  // The suspect takes no slot: it and the nearest responsive candidate are asked at once.
  CHECK(ids_of(lookup.next_queries(clock.now())) == std::vector<PeerId>{suspect, b});
  CHECK(lookup.in_flight() == 1);
  CHECK(lookup.stalled() == 1);
  CHECK(lookup.next_stall() == clock.now() + 500ms);  // b's; never the suspect's
  clock.advance(1ms);
  lookup.on_answer(b, {});
  CHECK(ids_of(lookup.next_queries(clock.now())) == std::vector<PeerId>{c});
  lookup.on_answer(c, {});
  // Two answered (k): done, though the suspect, nearest of all, never answered.
  CHECK(lookup.done());
  CHECK(ids_of(lookup.nearest_answered(2)) == std::vector<PeerId>{b, c});
  CHECK(lookup.stall_overdue(clock.now() + 10s).empty());
}

TEST_CASE("The stall time follows the answers: a multiple of the slowest, within its bounds", "[unit][dht]") {
  std::mt19937_64 rng(13);
  ManualClock clock;
  PeerId target = random_id(rng), self = at_distance(target, 0, 0x80);
  auto d = [&](int distance) { return at_distance(target, static_cast<std::uint8_t>(distance)); };
  std::vector<Contact> seeds;
  for (int distance = 1; distance <= 8; ++distance) seeds.push_back(contact(d(distance)));
  Lookup lookup(target, self, seeds, {.k = 8, .alpha = 4, .stall_after = 500ms, .min_stall_after = 100ms});
  CHECK(lookup.stall_time() == 500ms);  // no answer yet: the upper bound
  REQUIRE(lookup.next_queries(clock.now()).size() == 4);
  clock.advance(2ms);
  lookup.on_answer(d(1), {}, clock.now());
  CHECK(lookup.stall_time() == 100ms);  // 4 x 2 ms, raised to the lower bound
  CHECK(lookup.next_stall() == TimePoint{} + 100ms);  // queries already in flight stall sooner too
  clock.advance(48ms);
  lookup.on_answer(d(2), {}, clock.now());
  CHECK(lookup.stall_time() == 200ms);  // 4 x 50 ms
  clock.advance(150ms);
  lookup.on_answer(d(3), {}, clock.now());
  CHECK(lookup.stall_time() == 500ms);  // 4 x 200 ms, capped
  // Without a lower bound the stall time stays at the upper one.
  Lookup fixed(target, self, seeds, {.k = 8, .alpha = 4, .stall_after = 500ms});
  REQUIRE(fixed.next_queries(clock.now()).size() == 4);
  clock.advance(1ms);
  fixed.on_answer(d(1), {}, clock.now());
  CHECK(fixed.stall_time() == 500ms);
  // Without stalls, never.
  Lookup waiting(target, self, seeds, {.k = 8, .alpha = 4});
  CHECK(waiting.stall_time() == Duration::zero());
  REQUIRE(waiting.next_queries(clock.now()).size() == 4);
  CHECK(waiting.next_stall() == TimePoint::max());
}

namespace {

struct TimedRun {
  Duration took{0};
  size_t queries = 0;
};

// Runs `lookup` on `clock` over `net`: a live node answers `latency` after it is asked; a dead one fails
// at its RPC deadline, `deadline` after it is asked.
TimedRun run_timed(Lookup& lookup, const Network& net, size_t answer_size, ManualClock& clock, Duration latency,
                   Duration deadline) {
  struct Event {
    TimePoint at;
    PeerId from;
    bool operator>(const Event& other) const { return at > other.at; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  TimedRun stats;
  TimePoint start = clock.now();
  while (true) {
    lookup.stall_overdue(clock.now());
    for (const auto& c : lookup.next_queries(clock.now())) {
      ++stats.queries;
      events.push({clock.now() + (net.dead.contains(c.id) ? deadline : latency), c.id});
    }
    if (lookup.done() || events.empty()) break;
    TimePoint wake = std::min(events.top().at, lookup.next_stall());
    clock.advance(wake - clock.now());
    if (events.top().at > clock.now()) continue;  // a stall, not an outcome
    Event next = events.top();
    events.pop();
    if (net.dead.contains(next.from)) {
      lookup.on_failure(next.from);
    } else {
      lookup.on_answer(next.from, net.tables.at(next.from).nearest(lookup.target(), answer_size), clock.now());
    }
  }
  stats.took = clock.now() - start;
  return stats;
}

}  // namespace

TEST_CASE("With half the network dead, a lookup pays stall times for dead nodes, not RPC deadlines",
          "[unit][dht]") {
  std::mt19937_64 rng(12);
  const size_t k = 5, alpha = 4, answer_size = 20;  // the node's defaults
  const Duration deadline = 2s, stall = 500ms, latency = 2ms;
  Network net(200, 20, rng);
  std::vector<Duration> took, adaptive_took;
  for (int trial = 0; trial < 20; ++trial) {
    net.dead.clear();
    PeerId self = net.ids[rng() % net.ids.size()];
    for (const auto& id : net.ids) {
      if (id != self && rng() % 2 == 0) net.dead.insert(id);
    }
    PeerId target = random_id(rng);
    auto seeds = net.tables.at(self).nearest(target, 20);
    INFO("trial " << trial << ", target " << target.to_string());

    ManualClock clock;
    Lookup lookup(target, self, seeds, {.k = k, .alpha = alpha, .stall_after = stall});
    TimedRun timed = run_timed(lookup, net, answer_size, clock, latency, deadline);
    REQUIRE(lookup.done());
    auto found = ids_of(lookup.nearest_answered(k));
    CHECK(found.size() == k);
    for (const auto& id : found) CHECK_FALSE(net.dead.contains(id));
    took.push_back(timed.took);

    // Waiting for every query, as a lookup without stalls does, pays a whole deadline where this one paid a
    // stall time: each dead node met costs deadline / stall times less.
    ManualClock old_clock;
    Lookup waiting(target, self, seeds, {.k = k, .alpha = alpha});
    TimedRun slow = run_timed(waiting, net, answer_size, old_clock, latency, deadline);
    CHECK(slow.took >= deadline);  // every trial meets a dead node
    CHECK(timed.took <= slow.took / (deadline / stall) + latency * timed.queries);

    // A stall time that follows the answers (4 x 2 ms, raised to 100 ms) cuts it further.
    ManualClock adaptive_clock;
    Lookup adaptive(target, self, seeds, {.k = k, .alpha = alpha, .stall_after = stall, .min_stall_after = 100ms});
    TimedRun fast = run_timed(adaptive, net, answer_size, adaptive_clock, latency, deadline);
    REQUIRE(adaptive.done());
    CHECK(adaptive.nearest_answered(k).size() == k);
    CHECK(fast.took <= timed.took);
    adaptive_took.push_back(fast.took);
  }
  // The typical lookup ends within one RPC deadline, and within a fraction of one when the stall time
  // follows the answers. (One that meets dead nodes one after another, each entering the k nearest only
  // once the one before stalled, still pays a stall for each.)
  std::sort(took.begin(), took.end());
  CHECK(took[took.size() / 2] < deadline);
  std::sort(adaptive_took.begin(), adaptive_took.end());
  CHECK(adaptive_took[adaptive_took.size() / 2] < deadline / 4);
}
