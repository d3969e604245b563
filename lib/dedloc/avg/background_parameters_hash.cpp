#include "dedloc/avg/background_parameters_hash.hpp"

namespace dedloc::avg {

BackgroundParametersHash::BackgroundParametersHash() : worker_([this] { run(); }) {}

BackgroundParametersHash::~BackgroundParametersHash() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void BackgroundParametersHash::submit(std::shared_ptr<const TrainingState> state) {
  {
    std::lock_guard lock(mutex_);
    pending_ = std::move(state);
    ++submitted_;
  }
  changed_.notify_all();
}

std::uint64_t BackgroundParametersHash::latest() const {
  std::lock_guard lock(mutex_);
  return hashed_generation_ == submitted_ ? hash_ : 0;
}

std::uint64_t BackgroundParametersHash::wait_latest(Duration timeout) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return hashed_generation_ == submitted_ || stopping_; });
  return hashed_generation_ == submitted_ ? hash_ : 0;
}

void BackgroundParametersHash::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return pending_ || stopping_; });
    if (stopping_) return;
    auto state = std::move(pending_);
    pending_.reset();
    const std::uint64_t generation = submitted_;
    lock.unlock();
    const std::uint64_t hash = parameters_hash(*state);
    state.reset();  // the served copy may be the last reference: freed off the lock
    lock.lock();
    hashed_generation_ = generation;
    hash_ = hash;
    changed_.notify_all();
  }
}

}  // namespace dedloc::avg
