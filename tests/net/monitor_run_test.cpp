// The monitor's polling loop (monitor::Monitor::run) against a loopback DHT swarm: a trainer's progress
// record becomes a history row handed to the caller, and the loop stops when asked.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>

#include "dedloc/collab/progress.hpp"
#include "dedloc/monitor/monitor.hpp"
#include "support/quiet_swarm.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

TEST_CASE("Monitor::run: a trainer's record becomes a row, and the loop stops when asked", "[net][monitor]") {
  auto swarm = test::quiet_swarm(2);
  collab::PeerProgress progress;
  progress.epoch = 4;
  progress.samples_per_second = 32;
  progress.time = SystemClock::instance().unix_seconds();
  REQUIRE(collab::publish_progress(swarm->node(0), "watched", progress, 60s, Deadline::after(5s)).is_ok());

  monitor::Monitor monitor(swarm->node(1), "watched", monitor::History{});
  std::atomic<int> rows{0};
  std::atomic<bool> stop{false};
  auto running = std::async(std::launch::async, [&] {
    monitor.run([&] { return stop.load(); }, 100ms, [&] { ++rows; });
  });
  const Deadline give_up = Deadline::after(10s);
  while (rows == 0 && !give_up.passed()) std::this_thread::sleep_for(20ms);  // polling for the first row
  const auto asked = std::chrono::steady_clock::now();
  stop = true;
  REQUIRE(running.wait_for(15s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - asked < 11s);  // at most one poll under way (its deadline: 10 s)
  REQUIRE(rows >= 1);
  CHECK(monitor.view().epoch == 4);
  CHECK(monitor.view().trainers == 1);
  CHECK_THAT(monitor::summary_line(monitor.view()), Catch::StartsWith("epoch 4: 1 peer(s) (1 trainer"));
}
