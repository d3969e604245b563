// A process-wide default that a tool sets once at start-up and every server and client made afterwards
// reads where it was given none (net::AccessControl, net::TransportKeys). Safe from any thread.
#pragma once

#include <memory>
#include <mutex>

namespace dedloc {

template <class T>
class ProcessDefault {
 public:
  std::shared_ptr<T> get() const {
    std::lock_guard lock(mutex_);
    return value_;
  }
  void set(std::shared_ptr<T> value) {
    std::lock_guard lock(mutex_);
    value_ = std::move(value);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<T> value_;
};

}  // namespace dedloc
