// Token buckets for requests and bytes, one per sender (a ZeroMQ connection, or a datagram's source
// address), so that a flooding peer is refused cheaply while everyone else is served.
#pragma once

#include <string>
#include <unordered_map>

#include "dedloc/core/clock.hpp"

namespace dedloc::net {

// Per sender. A peer may open several connections (or ports); the buckets bound each, and `max_tracked`
// bounds how many are remembered (idle ones are forgotten first).
struct PeerRateLimits {
  double requests_per_second = 20000;          // sustained; 0: no request limit
  double request_burst = 20000;                // the bucket's size
  double bytes_per_second = 4.0 * (1u << 30);  // sustained, header and payload frames; 0: no byte limit
  double byte_burst = 1.0 * (1u << 30);
  size_t max_tracked = 4096;
};

// What a request that failed its access check costs its sender, in requests: checking a signature costs
// ~50 µs, so an outsider replaying a member's token would otherwise buy a core's worth of checks per
// connection at the full request rate.
inline constexpr double kAuthFailureCost = 100;

// One thread's (a server loop's) buckets; not thread-safe.
class PeerRateLimiter {
 public:
  explicit PeerRateLimiter(PeerRateLimits limits) : limits_(limits) {}

  // Takes one request of `bytes` from the sender's buckets; false when it is over its limits.
  bool admit(const std::string& sender, size_t bytes);
  // Charges the sender `requests` more (a request that failed its access check costs more than one).
  void charge(const std::string& sender, double requests);

 private:
  struct Bucket {
    double requests = 0;
    double bytes = 0;
    TimePoint refilled;
  };
  PeerRateLimits limits_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace dedloc::net
