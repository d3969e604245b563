// The collaboration-state estimate (docs/architecture.md): from every peer's progress record, where the swarm is now
// and when it will have gathered the global batch. Pure functions: the tracker calls them with what it
// read from the DHT, tests with hand-made records.
//
//   global epoch E  = the largest epoch among non-client peers (clients may lag: they follow, never lead);
//                     with only clients, the largest epoch of all
//   samples S       = Σ over peers at epoch E of (accumulated + rate × (now − measured)), each peer's
//                     extrapolation capped at the target (a stale record cannot promise a batch forever);
//                     for a record that gives its micro-batch size m, rate × (now − measured) is rounded
//                     down to whole micro-batches (m, 2m, ... from the end of the one it was measured at):
//                     the samples its peer will have when it next looks, not a part of one it is computing
//   rate R          = Σ of all live peers' samples/s
//   ETA             = (B − S) / R, 0 once S ≥ B
//   next refresh in ≈ ETA · N / max(N + 3, 1.2 N), clipped to [min, max] (0.5 s and 10 s by default): often
//                     when the step is near or the swarm is small, rarely otherwise
#pragma once

#include <cstdint>
#include <vector>

#include "dedloc/collab/progress.hpp"

namespace dedloc::collab {

struct CollaborationState {
  std::uint64_t epoch = 0;              // global epoch E
  double samples_accumulated = 0;       // S, at `time`
  double samples_per_second = 0;        // R
  std::uint64_t target_batch_size = 0;  // B
  size_t peers = 0;                     // live records counted
  size_t client_peers = 0;
  double eta_seconds = 0;               // until S reaches B
  double time = 0;                      // unix seconds of this estimate
  double next_refresh_seconds = 1;

  bool batch_ready() const { return samples_accumulated >= static_cast<double>(target_batch_size); }
};

struct EstimateOptions {
  double min_refresh_seconds = 0.5;
  double max_refresh_seconds = 10;
};

// `peers` should hold our own, freshest record too (the tracker puts it there).
CollaborationState estimate_collaboration(const std::vector<PeerProgress>& peers, std::uint64_t target_batch_size,
                                          double now, const EstimateOptions& options = {});

// Whether the gradient round of `our_epoch` is over without us: a strict majority of the other live
// trainers (`others`: their progress records, ours left out) already stepped past it. A peer that lags (its
// last round ended late, its micro-batch is long, it just downloaded) and holds no group found ahead would
// otherwise look for a group that nobody looks for any more, wait out matchmaking, step with its own
// gradients, and start the next round late again: a lag that feeds itself until the peer falls two epochs
// behind. Loading the swarm's state instead puts it in the next round on time. A single peer ahead (one
// that stepped alone) is not a majority, so it moves nobody.
bool round_over_without_us(const std::vector<PeerProgress>& others, std::uint64_t our_epoch);

// The same question asked after our own search for the round found no group (nobody looking for it is left to
// meet): a strict majority of the trainers that reached the round, at our epoch or past it, are past it.
// Records behind us are left out: those peers take no part in the round, and a SIGKILLed peer's record
// lingers there until its TTL (Trainer::sit_out_missed_round).
bool round_done_without_us(const std::vector<PeerProgress>& others, std::uint64_t our_epoch);

// An exponential moving average of samples/s over compute time only (hivemind's PerformanceEMA): the time
// spent averaging or waiting between update() calls while paused does not count, so the rate others read
// is how fast this peer computes, not how fast the last step went. Others extrapolate our record at this
// rate to tell when our micro-batches end (collab::estimate_collaboration): a rate that counted the step's
// own work after a round (applying it, serving the new state) would read low, and the swarm would see
// every batch complete a little after it did.
class ThroughputEma {
 public:
  explicit ThroughputEma(double alpha = 0.1) : alpha_(alpha) {}
  // `samples` were processed since the last update (or resume); `now` in seconds, any monotonic clock.
  void update(std::uint64_t samples, double now);
  void pause() { paused_ = true; }
  // Restarts the clock at `now`: the paused time is not counted.
  void resume(double now);
  // A micro-batch begins at `now`: after a pause, the clock restarts here, so that whatever came between
  // the pause and this micro-batch does not count either. Between micro-batches computed back to back the
  // clock runs on (the loop between them is part of how fast this peer computes).
  void begin_micro_batch(double now) {
    if (paused_ || last_ < 0) resume(now);
  }
  double samples_per_second() const { return rate_; }

 private:
  double alpha_;
  double rate_ = 0;
  double last_ = -1;
  bool paused_ = false;
  std::uint64_t updates_ = 0;
};

}  // namespace dedloc::collab
