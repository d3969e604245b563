// The parameters hash of the state a trainer serves (avg::parameters_hash), computed on a thread of its own.
//
// A step ends with a snapshot of the new state to serve and its hash for the progress record. Hashing is a
// pass over every parameter: ~25 ms for 2.25M parameters on one core here, and 10-20x that when a swarm's
// peers all hash at once on a shared machine, or for a model of 100M parameters. On the step's path that
// time delays the next micro-batch; here it overlaps it. The record carries no hash (0) until it is ready,
// which the divergence check reads as "not known yet" (collab/divergence.hpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "dedloc/avg/training_state.hpp"
#include "dedloc/core/clock.hpp"

namespace dedloc::avg {

class BackgroundParametersHash {
 public:
  BackgroundParametersHash();
  ~BackgroundParametersHash();  // lets a hash under way finish (bounded by one pass over the parameters)
  BackgroundParametersHash(const BackgroundParametersHash&) = delete;
  BackgroundParametersHash& operator=(const BackgroundParametersHash&) = delete;

  // Hashes `state` next; a state submitted earlier and not yet hashed is dropped, and the hash of any earlier
  // state is forgotten at once.
  void submit(std::shared_ptr<const TrainingState> state);
  // The hash of the state submitted last, or 0 while it is computed (never an earlier state's hash).
  std::uint64_t latest() const;
  // latest(), waiting up to `timeout` for it; 0 when it is not ready by then.
  std::uint64_t wait_latest(Duration timeout) const;

 private:
  void run();

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::shared_ptr<const TrainingState> pending_;  // submitted, not yet taken by the worker
  std::uint64_t submitted_ = 0;                   // generation of the state submitted last
  std::uint64_t hashed_generation_ = 0;           // generation `hash_` belongs to
  std::uint64_t hash_ = 0;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after the fields it reads
};

}  // namespace dedloc::avg
