#include "dedloc/core/latest_job.hpp"

#include <utility>

namespace dedloc {

LatestJob::LatestJob() : thread_([this] { run(); }) {}

LatestJob::~LatestJob() { stop(); }

void LatestJob::post(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  next_ = std::move(job);
  wake_.notify_all();
}

void LatestJob::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    next_ = nullptr;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool LatestJob::busy() const {
  std::lock_guard lock(mutex_);
  return running_ || next_ != nullptr;
}

void LatestJob::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || next_ != nullptr; });
    if (stopping_) return;
    auto job = std::exchange(next_, nullptr);
    running_ = true;
    lock.unlock();
    job();
    lock.lock();
    running_ = false;
  }
}

}  // namespace dedloc
