// A queue between threads whose pop waits at most until a deadline (no wait in dedloc is unbounded).
// Typical use: RPC completion callbacks push on the client's loop thread; a state machine pops in its own.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "dedloc/core/clock.hpp"

namespace dedloc {

template <class T>
class BlockingQueue {
 public:
  void push(T item) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
  }

  // The oldest item, or nullopt if none arrived before `deadline`.
  std::optional<T> pop(Deadline deadline) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_until(lock, deadline.at, [&] { return !items_.empty(); })) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
};

}  // namespace dedloc
