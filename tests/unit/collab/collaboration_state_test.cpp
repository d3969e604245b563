// The collaboration-state estimate and the throughput EMA (docs/architecture.md): pure functions on hand-made records.
#include <catch2/catch.hpp>

#include "dedloc/dht/validator.hpp"
#include "dedloc/collab/collaboration_state.hpp"
#include "dedloc/wire/map_codec.hpp"

using namespace dedloc;
using namespace dedloc::collab;

namespace {
PeerProgress peer(std::uint64_t epoch, std::uint64_t samples, double rate, double time, bool client = false) {
  PeerProgress p;
  p.epoch = epoch;
  p.samples_accumulated = samples;
  p.samples_per_second = rate;
  p.time = time;
  p.client_mode = client;
  return p;
}
}  // namespace

TEST_CASE("Estimate: samples at the global epoch, extrapolated to now, give the ETA", "[unit][train]") {
  // Two peers at epoch 7 measured 2 s ago, one behind at epoch 6 (its samples do not count toward 7).
  std::vector<PeerProgress> peers{peer(7, 100, 50, 98), peer(7, 200, 100, 98), peer(6, 1000, 10, 98)};
  auto s = estimate_collaboration(peers, 1000, 100);
  CHECK(s.epoch == 7);
  CHECK(s.peers == 3);
  CHECK(s.samples_accumulated == Approx(100 + 2 * 50 + 200 + 2 * 100));
  CHECK(s.samples_per_second == Approx(160));
  CHECK(s.eta_seconds == Approx((1000 - 600) / 160.0));
  CHECK_FALSE(s.batch_ready());
  // Refresh: ETA · N / max(N + 3, 1.2 N) = 2.5 · 3 / 6, within [0.5, 10].
  CHECK(s.next_refresh_seconds == Approx(2.5 * 3 / 6));
}

TEST_CASE("Estimate: a record with its micro-batch size counts whole micro-batches as they end", "[unit][train]") {
  // 40 samples/s in micro-batches of 16: one ends every 0.4 s after the record's time.
  PeerProgress a = peer(3, 32, 40, 100);
  a.micro_batch = 16;
  CHECK(estimate_collaboration({a}, 1000, 100.39).samples_accumulated == Approx(32));       // the 3rd still running
  CHECK(estimate_collaboration({a}, 1000, 100.4).samples_accumulated == Approx(48));        // ended just now
  CHECK(estimate_collaboration({a}, 1000, 100.79).samples_accumulated == Approx(48));
  CHECK(estimate_collaboration({a}, 1000, 101.2).samples_accumulated == Approx(32 + 3 * 16));
  // Without a size the same record is extrapolated continuously (a peer of an older version).
  a.micro_batch = 0;
  CHECK(estimate_collaboration({a}, 1000, 100.39).samples_accumulated == Approx(32 + 0.39 * 40));
  // The cap at the target holds either way.
  a.micro_batch = 16;
  CHECK(estimate_collaboration({a}, 100, 1000).samples_accumulated == Approx(100));

  // 16 peers computing 8 micro-batches of 16 each for a batch of 2,048, one ending its 8th a moment before
  // the others: counting parts of micro-batches, it would see 128 + 15 × (112 + 0.3 · 40) = 1,988 and start a
  // 9th; whole micro-batches show 1,808 now and the batch complete 0.1 s later without it.
  std::vector<PeerProgress> swarm;
  for (int k = 0; k < 15; ++k) {
    PeerProgress other = peer(5, 112, 40, 99.7);  // its 7th ended 0.3 s ago, its 8th ends in 0.1 s
    other.micro_batch = 16;
    swarm.push_back(other);
  }
  PeerProgress self = peer(5, 128, 0, 100);  // held where it is: not computing another
  self.micro_batch = 16;
  swarm.push_back(self);
  CHECK(estimate_collaboration(swarm, 2048, 100).samples_accumulated == Approx(1808));
  CHECK_FALSE(estimate_collaboration(swarm, 2048, 100.05).batch_ready());
  CHECK(estimate_collaboration(swarm, 2048, 100.1).samples_accumulated == Approx(2048));
  CHECK(estimate_collaboration(swarm, 2048, 100.1).batch_ready());
}

TEST_CASE("Estimate: clients follow, never lead, a stale record cannot promise a batch forever", "[unit][train]") {
  // A client claims epoch 9; the nodes are at 4: the global epoch is 4.
  auto s = estimate_collaboration({peer(9, 10, 5, 100, true), peer(4, 10, 5, 100)}, 100, 100);
  CHECK(s.epoch == 4);
  CHECK(s.client_peers == 1);
  // Only clients: the largest epoch among them.
  CHECK(estimate_collaboration({peer(3, 0, 1, 100, true), peer(5, 0, 1, 100, true)}, 100, 100).epoch == 5);
  // A record 1000 s old at 10 samples/s extrapolates to the target, not to 10 000 samples.
  auto stale = estimate_collaboration({peer(1, 0, 10, 0)}, 500, 1000);
  CHECK(stale.samples_accumulated == Approx(500));
  CHECK(stale.batch_ready());
  CHECK(stale.eta_seconds == 0);
  CHECK(stale.next_refresh_seconds == Approx(0.5));  // clipped below
}

TEST_CASE("Estimate: nobody computing yet means look again later, not divide by zero", "[unit][train]") {
  auto s = estimate_collaboration({peer(0, 0, 0, 100)}, 100, 100);
  CHECK(std::isfinite(s.eta_seconds));
  CHECK(s.next_refresh_seconds == Approx(10));
  auto empty = estimate_collaboration({}, 100, 100);
  CHECK(empty.epoch == 0);
  CHECK_FALSE(empty.batch_ready());
}

TEST_CASE("Throughput EMA counts compute time only", "[unit][train]") {
  ThroughputEma ema(0.5);
  ema.resume(0);
  ema.update(100, 1);  // 100/s
  CHECK(ema.samples_per_second() == Approx(100));
  ema.pause();         // averaging for 10 s: not compute
  ema.resume(11);
  ema.update(100, 12);  // again 100 samples in 1 s of compute
  CHECK(ema.samples_per_second() == Approx(100));
  ema.update(300, 13);  // 300/s, alpha 0.5 after the first updates
  CHECK(ema.samples_per_second() == Approx(200));
}

TEST_CASE("Throughput EMA restarts its clock at the micro-batch after a pause, not at the pause's end", "[unit][train]") {
  ThroughputEma ema(0.5);
  ema.begin_micro_batch(0);
  ema.update(100, 1);  // 100/s
  ema.begin_micro_batch(1);  // back to back: the clock runs on
  ema.update(100, 2);
  CHECK(ema.samples_per_second() == Approx(100));
  // A round (paused), then the step's own work after it: applying it, serving the state, 0.5 s of it. The
  // next micro-batch begins at 12.5 and takes 1 s: still 100/s, where a clock restarted when the round
  // ended (12) would read 67/s, and others would count our micro-batches as ending later than they do.
  ema.pause();
  ema.begin_micro_batch(12.5);
  ema.update(100, 13.5);
  CHECK(ema.samples_per_second() == Approx(100));
  // A gap between micro-batches that nobody paused for counts: it is how fast this peer goes.
  ema.begin_micro_batch(14.5);
  ema.update(100, 15.5);
  CHECK(ema.samples_per_second() == Approx(75));
}

TEST_CASE("Progress records round-trip, and hostile ones are refused", "[unit][train]") {
  PeerProgress p = peer(12, 345, 67.5, 1.7e9);
  p.client_mode = true;
  p.bandwidth = 1.25e7;
  p.compute = 80;
  p.params_hash = 0xfedcba9876543210ull;  // the full 64 bits survive
  p.round_seconds = 3.3;
  p.round_mad_seconds = 0.05;
  p.micro_batch = 16;
  p.joined_at = 9;
  auto back = decode_progress(encode_progress(p));
  REQUIRE(back.is_ok());
  CHECK(*back == p);
  // Records of peers that publish no hash or round figures read as 0 (none).
  PeerProgress plain = peer(12, 345, 67.5, 1.7e9);
  auto plain_back = decode_progress(encode_progress(plain));
  REQUIRE(plain_back.is_ok());
  CHECK(plain_back->params_hash == 0);
  CHECK(plain_back->round_seconds == 0);
  CHECK(plain_back->micro_batch == 0);
  CHECK(plain_back->joined_at == 0);
  wire::MapWriter negative_round;
  negative_round.put("epoch", std::uint64_t{1}).put("n", std::uint64_t{2}).put("sps", 1.0).put("t", 1.0).put("rs", -1.0);
  CHECK(decode_progress(negative_round.to_bytes()).status().code() == Code::kMalformed);

  wire::MapWriter negative;
  negative.put("epoch", std::uint64_t{1}).put("n", std::uint64_t{2}).put("sps", -5.0).put("t", 1.0);
  CHECK(decode_progress(negative.to_bytes()).status().code() == Code::kMalformed);
  wire::MapWriter missing;
  missing.put("epoch", std::uint64_t{1});
  CHECK_FALSE(decode_progress(missing.to_bytes()).is_ok());
  CHECK_FALSE(decode_progress(Bytes{0xc1}).is_ok());  // not msgpack

  // The DHT validator refuses what decode_progress would, before it reaches anyone's storage.
  dht::RecordValidator validator;
  add_progress_schema(validator);
  wire::RecordEntry good{Bytes{'s'}, encode_progress(p), 1.7e9 + 30, {}};
  wire::RecordEntry bad{Bytes{'s'}, negative.to_bytes(), 1.7e9 + 30, {}};
  CHECK(validator.validate(progress_key("run1"), good, 1.7e9).is_ok());
  CHECK_FALSE(validator.validate(progress_key("run1"), bad, 1.7e9).is_ok());
}

TEST_CASE("A round is over without us once most other trainers stepped past it", "[unit][collab]") {
  auto at = [](std::uint64_t epoch) { return peer(epoch, 0, 20, 1.7e9); };
  // Shaped like the lab's 64-peer run (bench/lab/README.md) when a lagging volunteer finished its batch:
  // 27 peers had averaged epoch 17 and stepped to 18, 24 others lagged at 17.
  std::vector<PeerProgress> others;
  for (int i = 0; i < 27; ++i) others.push_back(at(18));
  for (int i = 0; i < 24; ++i) others.push_back(at(17));
  CHECK(round_over_without_us(others, 17));       // 27 of 51 moved on
  CHECK_FALSE(round_over_without_us(others, 18)); // those at 18 are still in our round
  others.push_back(at(17));
  others.push_back(at(17));
  others.push_back(at(17));
  CHECK_FALSE(round_over_without_us(others, 17)); // 27 of 54: half is not a majority
  // One peer ahead (it stepped alone) moves nobody; nor does anything when we are alone.
  CHECK_FALSE(round_over_without_us({at(9), at(8), at(8)}, 8));
  CHECK_FALSE(round_over_without_us({}, 8));
  CHECK(round_over_without_us({at(9)}, 8));
  // Peers behind us count against "over": they may still look for a group at our epoch or before.
  CHECK_FALSE(round_over_without_us({at(9), at(7), at(7)}, 8));
}

TEST_CASE("After a search that found nobody, the round is done once most peers that reached it moved on",
          "[unit][collab]") {
  auto at = [](std::uint64_t epoch) { return peer(epoch, 0, 20, 1.7e9); };
  // A joiner in a churning swarm: two records of SIGKILLed peers linger behind; they do not hold it back.
  CHECK(round_done_without_us({at(9), at(9), at(7), at(6)}, 8));
  CHECK_FALSE(round_over_without_us({at(9), at(9), at(7), at(6)}, 8));
  // Those still at our epoch are in the round: half past is not a majority of them.
  CHECK_FALSE(round_done_without_us({at(9), at(8)}, 8));
  CHECK(round_done_without_us({at(9), at(9), at(8)}, 8));
  CHECK(round_done_without_us({at(10)}, 8));
  // Nobody reached the round (we are ahead, or alone): nothing to load.
  CHECK_FALSE(round_done_without_us({at(7), at(7)}, 8));
  CHECK_FALSE(round_done_without_us({}, 8));
}
