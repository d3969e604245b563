// A queue that other threads fill and one ZeroMQ poll loop drains.
//
// ZeroMQ sockets belong to one thread. Other threads hand work to that thread through a Mailbox: push()
// takes a mutex briefly and writes an eventfd, whose file descriptor the loop polls next to its sockets.
#pragma once

#include <deque>
#include <mutex>

namespace dedloc::net {

template <class T>
class Mailbox;

// The eventfd half, shared by all Mailbox instantiations.
class Doorbell {
 public:
  Doorbell();  // throws std::system_error when no eventfd can be made (out of file descriptors)
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  int fd() const { return fd_; }
  void ring();
  void clear();  // called by the loop before draining

 private:
  int fd_;
};

template <class T>
class Mailbox {
 public:
  void push(T item) {
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      was_empty = items_.empty();
      items_.push_back(std::move(item));
    }
    // A non-empty queue has already rung and not been drained yet (drain() clears the bell before it takes
    // the items), so one ring per batch is enough: a syscall saved per message in bursts.
    if (was_empty) doorbell_.ring();
  }
  // Takes everything queued so far (the loop calls this when fd() is readable).
  std::deque<T> drain() {
    doorbell_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    std::deque<T> out;
    out.swap(items_);
    return out;
  }
  int fd() const { return doorbell_.fd(); }

 private:
  std::mutex mutex_;
  std::deque<T> items_;
  Doorbell doorbell_;
};

}  // namespace dedloc::net
