// Prepares items (batches) ahead on a thread of its own, so that data loading does not stall training.
//
//   Prefetcher<Batch> batches(4, [&] { return make_batch(); });
//   auto next = batches.next();   // waits only if the producer has fallen behind
//
// The producer runs until the prefetcher is destroyed; an error it returns (or an exception it throws) is
// handed to the consumer once and stops production. The destructor never waits on a blocked consumer
// (there is none: the consumer is the thread destroying it) and the producer checks for shutdown between
// items, so shutdown takes at most one item's production time.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "dedloc/core/status.hpp"
#include "dedloc/train/torch_errors.hpp"

namespace dedloc::train {

template <class T>
class Prefetcher {
 public:
  using Producer = std::function<Result<T>()>;

  Prefetcher(size_t depth, Producer produce) : depth_(depth == 0 ? 1 : depth), produce_(std::move(produce)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next item, in production order.
  Result<T> next() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !items_.empty() || failed_; });
    if (items_.empty()) return failure_;
    Result<T> item = std::move(items_.front());
    items_.pop_front();
    changed_.notify_all();
    return item;
  }

 private:
  void run() {
    while (true) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || items_.size() < depth_; });
        if (stopping_) return;
      }
      // What the producer throws (libtorch's errors) is its failure, not std::terminate on this thread.
      Result<T> item = guard_torch("preparing a micro-batch", produce_);
      std::lock_guard lock(mutex_);
      if (!item) {
        failure_ = item.status();
        failed_ = true;
        changed_.notify_all();
        return;
      }
      items_.push_back(std::move(item));
      changed_.notify_all();
    }
  }

  const size_t depth_;
  Producer produce_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Result<T>> items_;
  bool stopping_ = false;
  bool failed_ = false;
  Status failure_;
  std::thread thread_;
};

}  // namespace dedloc::train
