#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "dedloc/core/wait_breaker.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

TEST_CASE("WaitBreaker interrupts only once asked to stop, repeats, and never after it is gone", "[unit][wait_breaker]") {
  std::atomic<bool> stop{false};
  std::atomic<int> interrupts{0};
  {
    WaitBreaker breaker([&] { return stop.load(); }, [&] { ++interrupts; }, 20ms);
    std::this_thread::sleep_for(150ms);
    CHECK(interrupts.load() == 0);
    CHECK_FALSE(breaker.fired());
    stop = true;
    const auto asked = std::chrono::steady_clock::now();
    while (interrupts.load() == 0 && std::chrono::steady_clock::now() - asked < 5s) std::this_thread::sleep_for(1ms);
    CHECK(std::chrono::steady_clock::now() - asked < 200ms);  // polled in slices of at most 50 ms
    std::this_thread::sleep_for(200ms);
    CHECK(interrupts.load() >= 3);  // again every 20 ms: a wait begun after one interrupt meets the next
    CHECK(breaker.fired());
  }
  const int at_end = interrupts.load();
  std::this_thread::sleep_for(100ms);
  CHECK(interrupts.load() == at_end);
}

TEST_CASE("WaitBreaker without a predicate does nothing", "[unit][wait_breaker]") {
  int interrupts = 0;
  { WaitBreaker breaker({}, [&] { ++interrupts; }); }
  CHECK(interrupts == 0);
}
