#include "dedloc/collab/averaging_timeouts.hpp"

#include <algorithm>

namespace dedloc::collab {

namespace {

// Until 3 rounds measured their parts, a ping may take this long (or the sender ceiling, if less).
constexpr Duration kUnlearnedLiveness = std::chrono::seconds(5);

}  // namespace

AveragingTimeouts::AveragingTimeouts(AveragingTimeoutsOptions options)
    : options_(options),
      matchmaking_({.floor = options.matchmaking_floor, .ceiling = options.matchmaking_ceiling, .window = 32,
                    .min_samples = 5, .k = 4, .factor = 2}),
      grace_({.floor = options.grace_floor, .ceiling = options.matchmaking_ceiling, .window = 32, .min_samples = 3,
              .k = 4, .factor = 2}),
      parts_({.floor = options.part_floor, .ceiling = options.sender_ceiling, .window = 32, .min_samples = 3, .k = 4,
              .factor = 4}) {
  // The grace's prior: factor (2) x a quarter = half the matchmaking ceiling, doubled by late joiners.
  grace_.seed(options.matchmaking_ceiling / 4, Duration::zero());
}

void AveragingTimeouts::observe_matchmaking(Duration took) { matchmaking_.observe(took); }
void AveragingTimeouts::observe_no_group() { matchmaking_.observe_timeout(); }
void AveragingTimeouts::observe_quorum_to_full(Duration after) { grace_.observe(after); }
void AveragingTimeouts::observe_late_joiners() { grace_.observe_timeout(); }
void AveragingTimeouts::observe_slowest_part(Duration trip) { parts_.observe(trip); }
void AveragingTimeouts::observe_part_timeout() { parts_.observe_timeout(); }

AveragingTimes AveragingTimeouts::times() const {
  AveragingTimes times;
  times.matchmaking_time = matchmaking_.deadline();
  times.grace = std::min(grace_.deadline(), times.matchmaking_time);
  times.sender_timeout = std::max(parts_.deadline(), std::min(link_floor_, options_.sender_ceiling));
  times.reducer_timeout = std::clamp(times.sender_timeout + parts_.deadline(), times.sender_timeout,
                                     std::max(options_.reducer_ceiling, times.sender_timeout));
  times.liveness_timeout = parts_.learned() ? std::min(parts_.deadline(), times.sender_timeout)
                                            : std::min(kUnlearnedLiveness, options_.sender_ceiling);
  return times;
}

Duration link_floor(const std::vector<PeerProgress>& records, double own_bandwidth, std::size_t payload_bytes) {
  double slowest = own_bandwidth;
  for (const auto& r : records) {
    if (r.bandwidth > 0 && (slowest <= 0 || r.bandwidth < slowest)) slowest = r.bandwidth;
  }
  if (slowest <= 0) return Duration::zero();
  return from_seconds(2 * static_cast<double>(payload_bytes) / slowest);
}

}  // namespace dedloc::collab
