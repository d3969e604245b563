#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dedloc/core/latest_job.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

namespace {
// Waits (bounded) until `done` holds.
template <typename Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = 5000ms) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}
}  // namespace

TEST_CASE("LatestJob runs off the caller's thread, and a newer job replaces one not yet begun", "[unit][latest_job]") {
  LatestJob jobs;
  std::mutex mutex;
  std::vector<int> ran;
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> first_running{false};
  const auto caller = std::this_thread::get_id();
  std::thread::id worker;
  jobs.post([&] {
    worker = std::this_thread::get_id();
    first_running = true;
    released.wait();  // a slow store: the caller goes on meanwhile
    std::lock_guard lock(mutex);
    ran.push_back(1);
  });
  REQUIRE(eventually([&] { return first_running.load(); }));
  CHECK(worker != caller);
  jobs.post([&] { std::lock_guard lock(mutex); ran.push_back(2); });  // replaced by the next, never run
  jobs.post([&] { std::lock_guard lock(mutex); ran.push_back(3); });
  CHECK(jobs.busy());
  release.set_value();
  REQUIRE(eventually([&] { return !jobs.busy(); }));
  std::lock_guard lock(mutex);
  CHECK(ran == std::vector<int>{1, 3});
}

TEST_CASE("LatestJob::stop waits for the running job, drops the waiting one, and ignores later posts", "[unit][latest_job]") {
  LatestJob jobs;
  std::atomic<int> ran{0};
  std::atomic<bool> running{false};
  jobs.post([&] {
    running = true;
    std::this_thread::sleep_for(100ms);
    ++ran;
  });
  REQUIRE(eventually([&] { return running.load(); }));
  jobs.post([&] { ran += 10; });
  jobs.stop();
  CHECK(ran.load() == 1);  // the running one finished before stop returned; the waiting one never ran
  jobs.post([&] { ran += 100; });
  std::this_thread::sleep_for(50ms);
  CHECK(ran.load() == 1);
  jobs.stop();  // again: nothing to do
}
