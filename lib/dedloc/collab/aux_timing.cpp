#include "dedloc/collab/aux_timing.hpp"

#include <algorithm>

namespace dedloc::collab {

namespace {
// The longest an aux peer goes without reading the records: the estimate may schedule its next read up to
// 10 s out (nobody has a rate yet, or the batch is far), but a trainer that joins or starts computing
// changes the ETA, and an aux peer that noticed 10 s later would have missed the round's group.
constexpr double kLongestWaitSeconds = 2;
}  // namespace

AuxRoundTiming time_aux_round(const std::vector<PeerProgress>& trainers, std::optional<std::uint64_t> last_looked,
                              std::uint64_t target_batch_size, Duration matchmaking_time, double now,
                              const EstimateOptions& options) {
  // Without a known batch the estimate's samples and ETA mean nothing; its epoch still does.
  const CollaborationState state = estimate_collaboration(trainers, std::max<std::uint64_t>(target_batch_size, 1), now, options);
  AuxRoundTiming timing;
  timing.epoch = state.epoch;
  if (last_looked && state.epoch <= *last_looked) {
    timing.wait = from_seconds(options.min_refresh_seconds);
    return timing;
  }
  const double early = state.eta_seconds - std::chrono::duration<double>(matchmaking_time).count();
  if (target_batch_size == 0 || early <= 0) {
    timing.look_now = true;
    return timing;
  }
  timing.wait = from_seconds(std::min({early, state.next_refresh_seconds, kLongestWaitSeconds}));
  return timing;
}

}  // namespace dedloc::collab
