// Work that must not hold up its caller, where only the newest request matters: publishing a record that
// the next publication replaces anyway.
//
// A LatestJob runs the jobs posted to it on a thread of its own, one at a time. A job posted while another
// waits to start replaces it (the waiting one never runs); one already running finishes. The trainer posts
// its donor advertisement and metrics record here after every step: two DHT stores, each a lookup and a
// store at internet round trips, that would otherwise delay the next batch's first micro-batch.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace dedloc {

class LatestJob {
 public:
  LatestJob();
  // stop().
  ~LatestJob();
  LatestJob(const LatestJob&) = delete;
  LatestJob& operator=(const LatestJob&) = delete;

  // Queues `job` in place of any that has not started yet. Ignored after stop().
  void post(std::function<void()> job);
  // Drops a job that has not started, waits for the one running (jobs bound their own waits by
  // deadlines), and ends the thread. Idempotent.
  void stop();
  // Whether a job is waiting or running (for tests).
  bool busy() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::function<void()> next_;  // under mutex_
  bool running_ = false;        // under mutex_
  bool stopping_ = false;       // under mutex_
  std::thread thread_;
};

}  // namespace dedloc
