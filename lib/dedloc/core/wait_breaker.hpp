// Ending a blocking call early when the process is told to stop (a shutdown signal).
//
// Waits on the network (a DHT join, a state download, matchmaking) are bounded by deadlines of seconds to
// minutes; a peer that is interrupted should not sit them out. A WaitBreaker lives around such a call on
// the owner's thread: its own thread polls `should_stop` and, once it says so, calls `interrupt` (which
// fails the waits: net::Client::cancel_pending, Averager::interrupt, Node::cancel_bootstrap) again every
// `every` until the breaker is destroyed, so that a wait begun just after one interrupt is caught by the
// next.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "dedloc/core/clock.hpp"

namespace dedloc {

class WaitBreaker {
 public:
  // No thread at all when `should_stop` is empty.
  WaitBreaker(std::function<bool()> should_stop, std::function<void()> interrupt,
              Duration every = std::chrono::milliseconds(100));
  // Ends the watch: `interrupt` is not running, and never runs again, once it returns.
  ~WaitBreaker();
  WaitBreaker(const WaitBreaker&) = delete;
  WaitBreaker& operator=(const WaitBreaker&) = delete;

  // `interrupt` was called at least once.
  bool fired() const { return fired_.load(); }

 private:
  void watch();

  std::function<bool()> should_stop_;
  std::function<void()> interrupt_;
  Duration every_;
  std::atomic<bool> fired_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;  // under mutex_
  std::thread thread_;
};

}  // namespace dedloc
