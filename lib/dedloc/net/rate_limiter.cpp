#include "dedloc/net/rate_limiter.hpp"

#include <algorithm>

namespace dedloc::net {

bool PeerRateLimiter::admit(const std::string& sender, size_t bytes) {
  if (limits_.requests_per_second <= 0 && limits_.bytes_per_second <= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  auto it = buckets_.find(sender);
  if (it == buckets_.end()) {
    if (buckets_.size() >= limits_.max_tracked) {
      // Forget senders idle long enough to have refilled; if that frees nothing, start over (a peer
      // opening thousands of connections gets fresh buckets, each still bounded).
      std::erase_if(buckets_, [&](const auto& b) { return now - b.second.refilled > std::chrono::seconds(10); });
      if (buckets_.size() >= limits_.max_tracked) buckets_.clear();
    }
    it = buckets_.emplace(sender, Bucket{limits_.request_burst, limits_.byte_burst, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed = std::chrono::duration<double>(now - b.refilled).count();
  b.refilled = now;
  b.requests = std::min(limits_.request_burst, b.requests + elapsed * limits_.requests_per_second);
  b.bytes = std::min(limits_.byte_burst, b.bytes + elapsed * limits_.bytes_per_second);
  const bool requests_ok = limits_.requests_per_second <= 0 || b.requests >= 1;
  const bool bytes_ok = limits_.bytes_per_second <= 0 || b.bytes >= static_cast<double>(bytes) ||
                        b.bytes >= limits_.byte_burst;  // a message larger than the burst passes a full bucket
  if (!requests_ok || !bytes_ok) return false;
  b.requests -= 1;
  b.bytes -= static_cast<double>(bytes);
  return true;
}

void PeerRateLimiter::charge(const std::string& sender, double requests) {
  auto it = buckets_.find(sender);
  if (it != buckets_.end() && limits_.requests_per_second > 0) it->second.requests -= requests;
}

}  // namespace dedloc::net
