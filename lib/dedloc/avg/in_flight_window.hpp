// How many parts a sender keeps in flight to each reducer, sized from what it measures rather than fixed,
// the way BBR sizes a TCP window: the most data the path delivered per second (the largest delivery
// rate seen) times the shortest time a part took to come back averaged (its round trip with no queue),
// doubled so that the pipe stays full while the estimates lag. Where parts come back within 30 ms
// (loopback, a LAN) the floor (AllReduceOptions::window) holds; on a 100 Mbit/s path 100 ms long, where a
// part takes several hundred milliseconds to come back averaged, it is several megabytes, which two
// 512 KiB parts per reducer cannot cover (bench/lab/README.md has the numbers).
//
// A sample is one part's life: sent at t0, its delta back at t1. Its delivery rate is the bytes delivered
// (deltas received, any reducer) between t0 and t1, over t1 - t0. Sans-IO: the caller passes the times.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dedloc/core/clock.hpp"

namespace dedloc::avg {

class InFlightWindow {
 public:
  // `floor` and `ceiling` bound the window per reducer; it starts at `start` (clamped).
  InFlightWindow(size_t floor, size_t ceiling, size_t start);

  // The ticket of a part sent now: pass it back to on_delivered.
  std::uint64_t ticket() const { return delivered_; }
  // A part of `bytes` bytes came back averaged `latency` after it was sent with `ticket`.
  void on_delivered(std::uint64_t bytes, Duration latency, std::uint64_t ticket);

  // Parts in flight per reducer, for `reducers` reducers and parts of `part_bytes` bytes.
  size_t per_reducer(size_t reducers, std::uint64_t part_bytes) const;

  double max_rate() const { return max_rate_; }          // bytes/s
  Duration min_latency() const { return min_latency_; }  // zero until a sample came

 private:
  size_t floor_, ceiling_, start_;
  std::uint64_t delivered_ = 0;
  double max_rate_ = 0;
  Duration min_latency_{0};
};

}  // namespace dedloc::avg
