#include "dedloc/collab/divergence.hpp"

#include <algorithm>
#include <map>

#include "dedloc/dht/record.hpp"

namespace dedloc::collab {

DivergenceVerdict judge_divergence(const std::vector<PeerProgress>& others, const PeerProgress& own) {
  DivergenceVerdict verdict;
  verdict.peers = others.size() + 1;
  std::map<std::uint64_t, size_t> at_our_epoch;
  if (own.params_hash != 0) ++at_our_epoch[own.params_hash];
  for (const auto& record : others) {
    if (record.epoch == own.epoch && record.params_hash != 0) ++at_our_epoch[record.params_hash];
  }
  // The live records that may yet side with any hash at our epoch: those one epoch behind (in its round
  // now) and those at it without a hash (not computed yet, or a peer that publishes none). A record
  // further behind will load a later state instead of stepping to ours; one ahead has gone past it.
  size_t unknown = own.params_hash == 0 ? 1 : 0;
  for (const auto& record : others) {
    if ((record.epoch == own.epoch && record.params_hash == 0) || record.epoch + 1 == own.epoch) ++unknown;
  }
  // The leader (ties to the smaller hash), and the runner-up's count.
  std::uint64_t leader = 0;
  size_t lead = 0, runner_up = 0;
  for (const auto& [hash, count] : at_our_epoch) {  // ascending hashes: a tie keeps the smaller
    if (count > lead) {
      runner_up = lead;
      leader = hash;
      lead = count;
    } else {
      runner_up = std::max(runner_up, count);
    }
  }
  size_t reported = 0;  // records at our epoch with a hash, ours included
  for (const auto& [hash, count] : at_our_epoch) reported += count;
  const bool decided = lead >= 2 && (lead > runner_up + unknown || (unknown == 0 && lead == runner_up));
  verdict.split_settled = !decided && lead >= 3 && reported >= 4 * unknown;
  if (decided || verdict.split_settled) {
    verdict.swarm_hash = leader;
    verdict.agreeing = lead;
  }
  verdict.diverged = own.params_hash != 0 && verdict.swarm_hash != 0 && verdict.swarm_hash != own.params_hash;
  verdict.agrees = own.params_hash != 0 && verdict.swarm_hash == own.params_hash;
  return verdict;
}

std::vector<crypto::PeerId> peers_apart(const std::vector<PeerProgress>& records,
                                        const std::function<std::uint64_t(std::uint64_t epoch)>& wanted) {
  std::map<std::uint64_t, std::uint64_t> wanted_at;  // asked once per epoch
  std::vector<crypto::PeerId> apart;
  for (const auto& record : records) {
    if (record.params_hash == 0) continue;
    auto known = wanted_at.find(record.epoch);
    if (known == wanted_at.end()) known = wanted_at.emplace(record.epoch, wanted(record.epoch)).first;
    if (known->second == 0 || known->second == record.params_hash) continue;
    const ByteSpan subkey(reinterpret_cast<const std::uint8_t*>(record.peer.data()), record.peer.size());
    if (auto owner = dht::owner_peer_id(subkey)) apart.push_back(*owner);
  }
  return apart;
}

DivergenceWatch::Action DivergenceWatch::on_verdict(const DivergenceVerdict& verdict, std::uint64_t epoch) {
  if (!enabled_) return Action::kNone;
  if (!verdict.diverged) {
    // Agreeing with a majority after the resync's epoch: the resync held. (Not while our own hash is still
    // being computed: that is no verdict on our parameters.)
    if (resynced_at_ && verdict.agrees && epoch > *resynced_at_) {
      resynced_at_.reset();
      resyncs_in_a_row_ = 0;
    }
    return Action::kNone;
  }
  // Apart again after a step taken since the last resync: it did not hold. That tells something about us
  // only where the swarm is one model (a strict majority holds the leading hash). In a swarm split into sets
  // the set that leads at one epoch need not lead at the next, its members' groups mixing with the others',
  // so being apart after our step proves nothing: we resync again, as often as it takes to join a set that
  // stays ahead. (In a 64-peer lab run whose swarm split at its start, 25 trainers gave up so, wrongly
  // blaming their arithmetic, and trained apart for the rest of the run.)
  const bool one_model = 2 * verdict.agreeing > verdict.peers;
  if (resynced_at_ && epoch > *resynced_at_ && one_model) {
    if (stepped_in_full_since_) {
      enabled_ = false;
      return Action::kGiveUp;
    }
    if (resyncs_in_a_row_ >= kMaxResyncsInARow) {
      enabled_ = false;
      return Action::kGiveUpAfterRepeats;
    }
  }
  return Action::kResync;
}

void DivergenceWatch::on_resynced(std::uint64_t epoch) {
  resynced_at_ = epoch;
  ++resyncs_in_a_row_;
  stepped_in_full_since_ = false;
}

void DivergenceWatch::on_step(bool averaged_with_swarm) {
  if (resynced_at_) stepped_in_full_since_ = averaged_with_swarm;
}

}  // namespace dedloc::collab
