#include "dedloc/core/wait_breaker.hpp"

namespace dedloc {

WaitBreaker::WaitBreaker(std::function<bool()> should_stop, std::function<void()> interrupt, Duration every)
    : should_stop_(std::move(should_stop)), interrupt_(std::move(interrupt)), every_(every) {
  if (should_stop_) thread_ = std::thread([this] { watch(); });
}

WaitBreaker::~WaitBreaker() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WaitBreaker::watch() {
  // Polled in short slices before the first interrupt (a signal handler cannot wake a condition variable);
  // after it, interrupts repeat every `every_`.
  const Duration poll = std::min<Duration>(every_, std::chrono::milliseconds(50));
  std::unique_lock lock(mutex_);
  while (!done_) {
    if (fired_.load() || should_stop_()) {
      fired_.store(true);
      interrupt_();  // under the lock: the destructor cannot return while it runs
      wake_.wait_for(lock, every_, [this] { return done_; });
    } else {
      wake_.wait_for(lock, poll, [this] { return done_; });
    }
  }
}

}  // namespace dedloc
