// Progress trackers on a real DHT: each peer sees the others' progress, epochs propagate at once, a peer
// that withdraws stops counting, and records are owned (signed) by their peers.
#include <catch2/catch.hpp>

#include <thread>

#include "dedloc/collab/progress_tracker.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace dedloc::collab;
using namespace std::chrono_literals;

namespace {

TrackerOptions options() {
  TrackerOptions o;
  o.run_id = "run1";
  o.target_batch_size = 1000;
  o.record_ttl = 10s;
  o.estimate.min_refresh_seconds = 0.1;
  o.estimate.max_refresh_seconds = 0.5;
  o.log = &test::quiet_log();
  return o;
}

PeerProgress at(std::uint64_t epoch, std::uint64_t samples, double rate) {
  PeerProgress p;
  p.epoch = epoch;
  p.samples_accumulated = samples;
  p.samples_per_second = rate;
  return p;
}

// Waits (bounded) until `predicate` holds for the tracker's state.
template <class Predicate>
bool eventually(ProgressTracker& tracker, Predicate predicate, Duration timeout = 5s) {
  auto deadline = Deadline::after(timeout);
  while (!deadline.passed()) {
    tracker.refresh_now();
    if (predicate(tracker.state())) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

}  // namespace

TEST_CASE("Trackers see each other's progress, epochs at once, and withdrawals", "[net][train]") {
  auto swarm = test::quiet_swarm(3);
  ProgressTracker a(swarm->node(0), options()), b(swarm->node(1), options()), c(swarm->node(2), options());
  a.report(at(3, 100, 10));
  b.report(at(3, 200, 20));
  c.report(at(2, 900, 30));  // behind: its samples do not count toward epoch 3

  REQUIRE(eventually(a, [](const CollaborationState& s) { return s.peers == 3; }));
  auto s = a.state();
  CHECK(s.epoch == 3);
  CHECK(s.samples_per_second == Approx(60));
  CHECK(s.samples_accumulated >= 300);
  CHECK(s.samples_accumulated < 900);

  // c steps to epoch 4: the global epoch moves for everyone.
  c.report(at(4, 0, 30));
  REQUIRE(eventually(b, [](const CollaborationState& st) { return st.epoch == 4; }));

  // c leaves: the others stop counting it.
  REQUIRE(c.withdraw(Deadline::after(5s)).is_ok());
  REQUIRE(eventually(a, [](const CollaborationState& st) { return st.peers == 2 && st.epoch == 3; }));
}

TEST_CASE("Peers that start computing together count each other's samples at once", "[net][train]") {
  // As trainers start: a record at epoch 0 with no rate yet, read while nobody computes (so the next
  // scheduled read is the maximum, here far beyond the test's patience).
  auto o = options();
  o.estimate.min_refresh_seconds = 0.2;
  o.estimate.max_refresh_seconds = 60;
  auto swarm = test::quiet_swarm(2);
  ProgressTracker a(swarm->node(0), o), b(swarm->node(1), o);
  a.report(at(0, 0, 0));
  b.report(at(0, 0, 0));
  REQUIRE(eventually(a, [](const CollaborationState& s) { return s.peers == 2; }));
  REQUIRE(eventually(b, [](const CollaborationState& s) { return s.peers == 2; }));

  // Both start computing: their first rates are published, and each reads the other's soon after, with
  // no refresh_now().
  a.report(at(0, 16, 80));
  b.report(at(0, 8, 40));
  auto deadline = Deadline::after(3s);
  while (!deadline.passed() && !(a.state().samples_per_second == Approx(120) && b.state().samples_per_second == Approx(120))) {
    std::this_thread::sleep_for(50ms);
  }
  CHECK(a.state().samples_per_second == Approx(120));
  CHECK(b.state().samples_per_second == Approx(120));
  CHECK(b.state().samples_accumulated >= 24);
}

TEST_CASE("A progress record under another peer's key is refused", "[net][train]") {
  auto swarm = test::quiet_swarm(2);
  // Node 1 tries to write under node 0's owner subkey: the DHT refuses an entry it cannot sign.
  std::string marker = dht::owner_marker(swarm->node(0).public_key());
  auto forged = swarm->node(1).store(progress_key("run1"), Bytes(marker.begin(), marker.end()),
                                     encode_progress(at(99, 1, 1)), SystemClock::instance().unix_seconds() + 10,
                                     Deadline::after(5s));
  CHECK_FALSE(forged.is_ok());
  auto records = read_progress(swarm->node(0), "run1", Deadline::after(5s));
  REQUIRE(records.is_ok());
  CHECK(records->empty());
}
