// Whether this peer's parameters have left the swarm's, from the parameter hashes in the progress records
// (wire::ProgressRecord::params_hash, avg::parameters_hash), and what the trainer does about it
// (docs/architecture.md, "Divergence"). Sans-IO: the trainer passes what its tracker read.
//
// Members of one all-reduce end it bit-identical (avg/all_reduce.hpp), and the same optimizer on the same
// values then takes the same step, so peers that averaged every step together carry equal hashes. A peer
// whose step went otherwise (it stepped alone, a reducer failed mid-round, a bug) carries another, and
// would go on training parameters nobody else has: it should download the swarm's state instead.
//
//   diverged  one hash leads among the run's live records at our epoch (ours included) by more than the
//             records that may still side with any hash there could make up (those one epoch behind, in
//             its round now, and those at it without a hash), held by two records or more, and ours
//             differs. A strict majority of all live records always leads so, and the first peers to
//             publish an epoch cannot outvote the rest before they report. Records further behind (they
//             will load a later state: joiners, peers that missed rounds) or already past our epoch do not
//             hold the decision up: under churn some always are. Once the rest reported, the largest set
//             wins, a tie going to the smaller hash, so a swarm split into sets (a round whose groups
//             averaged apart) converges on one model instead of staying split for good. With two peers that
//             differ nothing is ever decided (a lead needs two records).
//             A split also settles on its largest set (3 records or more) before the rest reported, once
//             those with a hash at our epoch are at least four times those that may still side with any:
//             under churn there always are some (a dead peer's record lingers for its lifetime, a late
//             cohort is a round behind), and in a 64-peer lab run five sets of 7-12 trainers stepped apart
//             for up to eight epochs, each on parameters of its own, none leading by more than those.
//
// DivergenceWatch turns verdicts into actions. A resync is a download of a donor's state whose hash is the
// leading one. If the first step after a resync was averaged in full, in a group of most of the swarm, and
// we still differ from a strict majority, our hardware or libraries compute the optimizer step differently
// in the last bits (a GPU among CPUs, another BLAS): resyncing every step would only cost downloads, so the
// watch gives up, and says so once. Where no hash holds a strict majority (the swarm is split into sets,
// the largest of which may change from one epoch to the next) it never gives up.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "dedloc/collab/progress.hpp"
#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::collab {

struct DivergenceVerdict {
  bool diverged = false;
  std::uint64_t swarm_hash = 0;  // the leading hash at our epoch, when one leads as above
  size_t agreeing = 0;           // records carrying swarm_hash
  size_t peers = 0;              // live records counted, ours included
  bool agrees = false;           // ours is swarm_hash (ours not computed yet: neither this nor diverged)
  bool split_settled = false;    // swarm_hash is the largest set of a split that nothing else decides (above)
};

// `others`: the other peers' live records; `own`: ours (its epoch and params_hash).
DivergenceVerdict judge_divergence(const std::vector<PeerProgress>& others, const PeerProgress& own);

// The peers whose record carries a hash other than `wanted(record.epoch)`, where that is not 0: a state
// downloaded from one of them would be refused (the trainer wants the swarm's leading parameters), so a
// download asks them after the others (avg::DownloadOptions::disfavoured). In 64-peer churn runs 2-18% of
// the downloads were so refused, each costing a download and a retry. Records not owned by a key name
// nobody.
std::vector<crypto::PeerId> peers_apart(const std::vector<PeerProgress>& records,
                                        const std::function<std::uint64_t(std::uint64_t epoch)>& wanted);

class DivergenceWatch {
 public:
  enum class Action {
    kNone,
    kResync,  // download the state of a donor whose hash is verdict.swarm_hash
    kGiveUp,  // we differ again right after a resync and a step averaged in full: stop resyncing (log it)
    // we differ again after kMaxResyncsInARow resyncs that did not hold (each followed by a step in a group
    // of a few, formed apart from the swarm): downloads are not helping, stop resyncing (log it)
    kGiveUpAfterRepeats,
  };
  static constexpr int kMaxResyncsInARow = 3;

  Action on_verdict(const DivergenceVerdict& verdict, std::uint64_t epoch);
  // A resync loaded a state at `epoch` carrying the majority's hash.
  void on_resynced(std::uint64_t epoch);
  // A step was taken: `averaged_with_swarm` when the whole vector came back averaged from a group of most of
  // the swarm (collab::averaged_with_swarm; a group of a few that formed apart leaves us apart too).
  void on_step(bool averaged_with_swarm);
  bool enabled() const { return enabled_; }

 private:
  bool enabled_ = true;
  std::optional<std::uint64_t> resynced_at_;  // the epoch of the last resync, until we agree again
  bool stepped_in_full_since_ = false;       // since that resync, the latest step was averaged in full
  int resyncs_in_a_row_ = 0;                  // resyncs since we last agreed with a majority after one
};

}  // namespace dedloc::collab
