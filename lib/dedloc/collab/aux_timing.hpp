// When an aux peer looks for the trainers' next round, sans-IO: records in, a decision out (AuxPeer reads
// the records and waits; tests/unit/collab/aux_timing_test.cpp drives the rules).
//
// An aux peer is nobody's expected member (group_buckets.hpp counts trainers only), so a group forms as soon
// as its expected trainers are in, with whichever aux peers joined by then. The aux peer must therefore be
// looking when the trainers start, and not much earlier either: a search it leads ends at its own deadline,
// matchmaking_time after it began, and forms with the trainers that came by then; the rest form a second
// group. Trainers look ahead once the swarm's ETA falls to their matchmaking time (Trainer::match_ahead),
// so an aux peer does the same:
//   round     the swarm's epoch E (collaboration_state.hpp), never one it already looked for: right after
//             its round the records may still say E until each trainer republishes, and a second search for
//             E meets only latecomers, a group of a few that leaves the next round's group without it
//   when      ETA ≤ matchmaking_time, with the run's global batch known and every trainer synchronous (a
//             delayed or DiLoCo trainer looks for its round at other moments); otherwise at once
//   the wait  until the ETA reaches matchmaking_time, at most the estimate's next refresh and 2 s; while the
//             records still show a round already looked for, the estimate's shortest refresh
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dedloc/collab/collaboration_state.hpp"
#include "dedloc/core/clock.hpp"

namespace dedloc::collab {

struct AuxRoundTiming {
  bool look_now = false;
  std::uint64_t epoch = 0;  // the round to look for (gradient_round(epoch)) when look_now
  Duration wait{};          // otherwise, how long before reading the records again
};

// `trainers`: the run's progress records (at least one); `last_looked`: the epoch of our last search, if
// any; `target_batch_size`: the run's global batch, 0 when unknown or when a trainer is not synchronous
// (then the ETA does not time us); `now` in unix seconds.
AuxRoundTiming time_aux_round(const std::vector<PeerProgress>& trainers, std::optional<std::uint64_t> last_looked,
                              std::uint64_t target_batch_size, Duration matchmaking_time, double now,
                              const EstimateOptions& options = {});

}  // namespace dedloc::collab
