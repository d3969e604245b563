#include "dedloc/collab/collaboration_state.hpp"

#include <algorithm>
#include <cmath>

namespace dedloc::collab {

namespace {

// The samples a record's peer computed since it was measured, at its rate: whole micro-batches where it says
// how big they are (they count once they end, as they do for the peer itself), continuously otherwise.
double samples_since(const PeerProgress& p, double now) {
  const double continuous = p.samples_per_second * std::max(0.0, now - p.time);
  if (p.micro_batch == 0) return continuous;
  const double batch = static_cast<double>(p.micro_batch);
  // The small slack keeps a micro-batch due exactly now from being lost to rounding.
  return batch * std::floor(continuous / batch + 1e-9);
}

}  // namespace

CollaborationState estimate_collaboration(const std::vector<PeerProgress>& peers, std::uint64_t target_batch_size,
                                          double now, const EstimateOptions& options) {
  CollaborationState state;
  state.target_batch_size = target_batch_size;
  state.time = now;
  state.peers = peers.size();
  bool any_node = false;
  for (const auto& p : peers) {
    if (p.client_mode) {
      ++state.client_peers;
      continue;
    }
    state.epoch = any_node ? std::max(state.epoch, p.epoch) : p.epoch;
    any_node = true;
  }
  if (!any_node) {
    for (const auto& p : peers) state.epoch = std::max(state.epoch, p.epoch);
  }
  const double target = static_cast<double>(target_batch_size);
  for (const auto& p : peers) {
    state.samples_per_second += p.samples_per_second;
    if (p.epoch != state.epoch) continue;
    const double extrapolated = static_cast<double>(p.samples_accumulated) + samples_since(p, now);
    state.samples_accumulated += std::min(extrapolated, std::max(target, static_cast<double>(p.samples_accumulated)));
  }
  if (state.samples_accumulated >= target) {
    state.eta_seconds = 0;
  } else if (state.samples_per_second > 0) {
    state.eta_seconds = (target - state.samples_accumulated) / state.samples_per_second;
  } else {
    state.eta_seconds = options.max_refresh_seconds;  // nobody computes yet: look again later
  }
  const double n = static_cast<double>(std::max<size_t>(1, state.peers));
  double refresh = state.samples_per_second > 0 ? state.eta_seconds * n / std::max(n + 3, 1.2 * n)
                                                : options.max_refresh_seconds;
  state.next_refresh_seconds = std::clamp(refresh, options.min_refresh_seconds, options.max_refresh_seconds);
  return state;
}

void ThroughputEma::update(std::uint64_t samples, double now) {
  if (paused_ || last_ < 0) {
    resume(now);
    return;
  }
  double elapsed = now - last_;
  last_ = now;
  if (elapsed <= 0) return;
  double instant = static_cast<double>(samples) / elapsed;
  // The first measurements carry more weight than alpha would give them (bias correction).
  ++updates_;
  double weight = std::max(alpha_, 1.0 / static_cast<double>(updates_));
  rate_ = weight * instant + (1 - weight) * rate_;
}

bool round_over_without_us(const std::vector<PeerProgress>& others, std::uint64_t our_epoch) {
  const auto past = std::count_if(others.begin(), others.end(), [&](const PeerProgress& p) { return p.epoch > our_epoch; });
  return 2 * static_cast<size_t>(past) > others.size();
}

bool round_done_without_us(const std::vector<PeerProgress>& others, std::uint64_t our_epoch) {
  const auto past = std::count_if(others.begin(), others.end(), [&](const PeerProgress& p) { return p.epoch > our_epoch; });
  const auto in_round = std::count_if(others.begin(), others.end(), [&](const PeerProgress& p) { return p.epoch == our_epoch; });
  return past > in_round;
}

void ThroughputEma::resume(double now) {
  paused_ = false;
  last_ = now;
}

}  // namespace dedloc::collab
