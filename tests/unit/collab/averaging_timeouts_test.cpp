// Matchmaking's and the all-reduce's learned waits (collab/averaging_timeouts.hpp), replayed on recorded
// sequences shaped like the lab's runs (bench/lab/README.md): 4 trainers at 20 ms round trips (groups
// found in about 0.3 s, the last joiner 0.1 s after the quorum, the slowest part back in about 0.15 s)
// and at 300 ms (about 1.6 s, 0.4 s and 1.1 s), a straggler on a 3x slower link, a move from the first
// network to the second, and a member that dies.
#include <catch2/catch.hpp>

#include <vector>

#include "dedloc/collab/averaging_timeouts.hpp"
#include "dedloc/collab/known_gone.hpp"

using namespace dedloc;
using namespace dedloc::collab;
using namespace std::chrono_literals;

namespace {

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// One round as the trainer sees it.
struct Round {
  double matchmaking;    // seconds from search start to group
  double quorum_to_full; // the last expected joiner after the quorum (< 0: we did not lead)
  double slowest_part;   // the round's slowest part round trip
};

const std::vector<Round> kFast = {{0.31, 0.10, 0.15}, {0.28, -1, 0.14}, {0.33, 0.12, 0.16}, {0.30, 0.08, 0.15},
                                  {0.29, -1, 0.17},   {0.32, 0.11, 0.15}, {0.30, 0.09, 0.14}, {0.31, -1, 0.16}};
const std::vector<Round> kSlow = {{1.62, 0.41, 1.10}, {1.55, -1, 1.05}, {1.70, 0.38, 1.14}, {1.58, 0.45, 1.08},
                                  {1.66, -1, 1.12},   {1.61, 0.40, 1.09}, {1.59, 0.43, 1.11}, {1.64, -1, 1.07}};

void replay(AveragingTimeouts& waits, const std::vector<Round>& rounds, double slowdown = 1) {
  for (const Round& r : rounds) {
    waits.observe_matchmaking(from_seconds(r.matchmaking * slowdown));
    if (r.quorum_to_full >= 0) waits.observe_quorum_to_full(from_seconds(r.quorum_to_full * slowdown));
    waits.observe_slowest_part(from_seconds(r.slowest_part * slowdown));
  }
}

AveragingTimeoutsOptions recipe() {  // a recipe's matchmaking_time 3, sender_timeout 15, reducer_timeout 30
  AveragingTimeoutsOptions options;
  options.matchmaking_ceiling = 3s;
  options.sender_ceiling = 15s;
  options.reducer_ceiling = 30s;
  return options;
}

}  // namespace

TEST_CASE("Averaging timeouts: the recipe's numbers until rounds were seen, a grace of half the matchmaking time",
          "[unit][deadline]") {
  AveragingTimeouts waits(recipe());
  auto times = waits.times();
  CHECK(times.matchmaking_time == 3s);
  CHECK(times.grace == 1500ms);  // the prior: a dead member costs half the matchmaking time at first
  CHECK(times.sender_timeout == 15s);
  CHECK(times.reducer_timeout == 30s);
  CHECK(times.liveness_timeout == 5s);
}

TEST_CASE("Averaging timeouts: 20 ms rounds give the floors, 300 ms rounds longer waits, under the ceilings",
          "[unit][deadline]") {
  AveragingTimeouts fast(recipe()), slow(recipe());
  replay(fast, kFast);
  replay(slow, kSlow);
  auto f = fast.times(), s = slow.times();
  CHECK(f.matchmaking_time == 1s);  // 2 x 0.3 s, under the 1 s floor
  CHECK(f.grace == 500ms);          // the floor
  CHECK(f.sender_timeout == 1s);    // 4 x 0.15 s, under the floor
  CHECK(f.reducer_timeout == 2s);
  CHECK(f.liveness_timeout == 1s);
  // 300 ms: about 2 x 1.6 s would exceed the recipe's 3 s: the ceiling holds.
  CHECK(s.matchmaking_time == 3s);
  CHECK(seconds(s.grace) == Approx(2 * 0.41).epsilon(0.05));  // every recorded grace fits
  for (const Round& r : kSlow) CHECK(r.quorum_to_full < seconds(s.grace));
  CHECK(seconds(s.sender_timeout) == Approx(4 * 1.095).epsilon(0.05));
  CHECK(s.reducer_timeout == 2 * s.sender_timeout);
  CHECK(s.liveness_timeout == s.sender_timeout);
  CHECK(s.sender_timeout < 15s);
}

TEST_CASE("Averaging timeouts: a straggler 3x slower lengthens the part waits enough to keep it", "[unit][deadline]") {
  AveragingTimeouts waits(recipe());
  // Rounds with the straggler: its parts, and everybody's parts waiting for its copies at the reducers,
  // come back 3x later.
  std::vector<Round> straggler = kSlow;
  for (Round& r : straggler) r.slowest_part *= 3;
  replay(waits, straggler);
  auto times = waits.times();
  for (const Round& r : straggler) CHECK(r.slowest_part * 2 < seconds(times.liveness_timeout));
  CHECK(times.sender_timeout <= 15s);
}

TEST_CASE("Averaging timeouts: a move from 20 ms to 300 ms is learned after a few doubled waits", "[unit][deadline]") {
  AveragingTimeouts waits(recipe());
  replay(waits, kFast);
  REQUIRE(waits.times().sender_timeout == 1s);
  // The network changes: the first rounds' members look gone or too slow to the old waits, twice in a row.
  // (Each doubles the estimate, 4 x 0.15 s, not the floor it was raised to.)
  waits.observe_part_timeout();
  CHECK(seconds(waits.times().sender_timeout) == Approx(1.2).epsilon(0.05));
  waits.observe_part_timeout();
  CHECK(seconds(waits.times().sender_timeout) == Approx(2.4).epsilon(0.05));  // covers a 1.1 s part now
  waits.observe_no_group();
  waits.observe_no_group();
  CHECK(waits.times().matchmaking_time > 2s);
  // Then the new rounds complete: the memory starts over from them and the waits settle on the new network.
  replay(waits, kSlow);
  CHECK(seconds(waits.times().sender_timeout) == Approx(4 * 1.095).epsilon(0.05));
  CHECK(waits.times().matchmaking_time == 3s);
}

TEST_CASE("Averaging timeouts: a member that died costs the grace, and live peers left out lengthen it",
          "[unit][deadline]") {
  AveragingTimeouts waits(recipe());
  replay(waits, kSlow);
  const Duration grace = waits.times().grace;
  CHECK(grace < 1s);  // the rest of a round after a death: well under the 3 s matchmaking time
  // A dead member never joins: its absence teaches nothing (no late join), the grace stays.
  CHECK(waits.times().grace == grace);
  // A grace that left a live peer out (its join came after the group formed) doubles, up to the
  // matchmaking time.
  waits.observe_late_joiners();
  CHECK(seconds(waits.times().grace) == Approx(2 * seconds(grace)).epsilon(0.001));
  waits.observe_late_joiners();
  waits.observe_late_joiners();
  CHECK(waits.times().grace == 3s);
  // A group that filled again starts the grace's memory over (the network changed): the prior holds
  // until three new ones, longer than what the old network taught.
  waits.observe_quorum_to_full(600ms);
  CHECK(waits.times().grace == 1500ms);
}

TEST_CASE("Known gone: a dead trainer leaves the expected count until its record expires", "[unit][deadline]") {
  const auto t0 = TimePoint{} + 1000s;
  const auto dead = crypto::PeerId::from_public_key(Bytes(32, 3));
  const auto alive = crypto::PeerId::from_public_key(Bytes(32, 4));
  KnownGone gone(30s);
  CHECK(gone.expected(3, t0) == 4);  // 3 records of others, us
  gone.add({dead}, 3, t0);
  CHECK(gone.expected(3, t0 + 1s) == 3);  // its record is still there: not expected
  CHECK(gone.expected(3, t0 + 10s) == 3);
  // Its record expired: the count of records already leaves it out.
  CHECK(gone.expected(2, t0 + 20s) == 3);
  CHECK(gone.size() == 0);
  CHECK(gone.expected(3, t0 + 21s) == 4);  // a newcomer came: expected again in full

  // Found gone, but it turns up in a group: it was not gone.
  gone.add({alive}, 3, t0);
  CHECK(gone.expected(3, t0) == 3);
  gone.seen({alive, dead});
  CHECK(gone.expected(3, t0) == 4);
  // And at most record_ttl later, whatever the records say.
  gone.add({dead}, 3, t0);
  CHECK(gone.expected(3, t0 + 29s) == 3);
  CHECK(gone.expected(3, t0 + 30s) == 4);
}

TEST_CASE("Averaging timeouts: the swarm's slowest upload sets a floor under the part waits, within the ceiling",
          "[unit][deadline]") {
  // The lab's 16 volunteers: public peers at 200 Mbit/s, whose rounds among themselves take 0.2-0.4 s, and
  // volunteers at 20 Mbit/s up; 1 M parameters in fp16 (2 MB a round). Buckets change every round, so the
  // next group may hold a volunteer, whose parts the learned 1 s cut (in one run 27 of 196 step reports
  // were below half averaged).
  std::vector<PeerProgress> records(3);
  records[0].bandwidth = 25e6;   // 200 Mbit/s
  records[1].bandwidth = 2.5e6;  // 20 Mbit/s
  records[2].bandwidth = 0;      // published none: not counted
  const Duration floor = link_floor(records, 25e6, 2'000'000);
  CHECK(seconds(floor) == Approx(2 * 2e6 / 2.5e6));  // 1.6 s
  CHECK(link_floor({}, 0, 2'000'000) == Duration::zero());
  CHECK(seconds(link_floor({}, 1.25e6, 1'000'000)) == Approx(1.6));  // ours alone

  AveragingTimeouts waits(recipe());
  replay(waits, kFast);
  CHECK(waits.times().sender_timeout == 1s);  // learned among fast peers: the floor of 1 s
  waits.set_link_floor(floor);
  const auto times = waits.times();
  CHECK(times.sender_timeout == floor);
  CHECK(times.reducer_timeout > times.sender_timeout);
  CHECK(times.liveness_timeout == 1s);  // a dead member is still found as soon as before
  waits.set_link_floor(60s);  // a very slow link: the recipe's ceiling still holds
  CHECK(waits.times().sender_timeout == 15s);
}
