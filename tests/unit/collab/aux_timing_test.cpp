// When an aux peer looks for the trainers' next round (collab/aux_timing.hpp): hand-made records in.
#include <catch2/catch.hpp>

#include "dedloc/collab/aux_timing.hpp"

using namespace dedloc;
using namespace dedloc::collab;
using namespace std::chrono_literals;

namespace {
PeerProgress trainer(std::uint64_t epoch, std::uint64_t samples, double rate, double time) {
  PeerProgress p;
  p.epoch = epoch;
  p.samples_accumulated = samples;
  p.samples_per_second = rate;
  p.time = time;
  return p;
}
double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

TEST_CASE("Aux timing: looks for the swarm's round once its ETA is within the matchmaking time", "[unit][aux]") {
  // Two trainers at epoch 4, 200 samples/s together: 1,000 of 2,000 samples in, ETA 5 s.
  const std::vector<PeerProgress> records{trainer(4, 500, 100, 100), trainer(4, 500, 100, 100)};
  auto far = time_aux_round(records, std::nullopt, 2000, 3s, 100);
  CHECK_FALSE(far.look_now);
  // Until the ETA is 3 s: 2 s, no later than the estimate's next refresh (5 · 2 / 5 = 2 s) and the 2 s cap.
  CHECK(seconds(far.wait) == Approx(2.0));
  auto near = time_aux_round(records, std::nullopt, 2000, 3s, 102.5);  // ETA 2.5 s
  CHECK(near.look_now);
  CHECK(near.epoch == 4);
  // A slower swarm: the wait is the estimate's next refresh, capped at 2 s.
  const std::vector<PeerProgress> slow{trainer(4, 0, 10, 100)};
  auto later = time_aux_round(slow, std::nullopt, 2000, 3s, 100);
  CHECK_FALSE(later.look_now);
  CHECK(seconds(later.wait) == Approx(2.0));
}

TEST_CASE("Aux timing: a round already looked for is not looked for again", "[unit][aux]") {
  // Right after our round for epoch 4 the records may still say 4, the batch complete: wait for them to move.
  const std::vector<PeerProgress> stale{trainer(4, 2000, 200, 100)};
  auto again = time_aux_round(stale, 4, 2000, 3s, 100);
  CHECK_FALSE(again.look_now);
  CHECK(seconds(again.wait) == Approx(EstimateOptions{}.min_refresh_seconds));
  // Without a known batch too: the records must move past 4 first.
  CHECK_FALSE(time_aux_round(stale, 4, 0, 3s, 100).look_now);
  // Once one trainer stepped to 5 the swarm is at 5; with nothing computed there yet it is not time either.
  const std::vector<PeerProgress> moved{trainer(4, 2000, 200, 100), trainer(5, 0, 200, 101)};
  auto next = time_aux_round(moved, 4, 2000, 3s, 101);
  CHECK_FALSE(next.look_now);
  CHECK(next.epoch == 5);
  // 4.5 s later: 900 samples at epoch 5, ETA (2,000 - 900) / 400 = 2.75 s.
  CHECK(time_aux_round(moved, 4, 2000, 3s, 105.5).look_now);
}

TEST_CASE("Aux timing: with the batch unknown (or trainers not synchronous), looks at once", "[unit][aux]") {
  const std::vector<PeerProgress> records{trainer(7, 0, 1, 100)};
  auto now = time_aux_round(records, std::nullopt, 0, 3s, 100);
  CHECK(now.look_now);
  CHECK(now.epoch == 7);
  CHECK(time_aux_round(records, 6, 0, 3s, 100).look_now);
}
