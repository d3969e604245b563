// How a run's peers combine their work: the recipe's `collaboration:` section (docs/recipes.md).
//
//   synchronous (default)  DeDLOC's exact large-batch SGD: peers accumulate gradients until the swarm has
//                          gathered training.target_batch_size samples, average them, and every peer applies
//                          the same optimizer step.
//   delayed                hivemind's delayed parameter updates: the peer averages a global batch's gradients in
//                          the background while it computes the next batch on the parameters it has, and applies
//                          the averaged step when the round ends, usually early in that next batch. The swarm
//                          still takes one step per global batch with the same averaged gradients everywhere,
//                          but each batch's gradients were computed on parameters one step old (at most): a
//                          staleness of one step, bought with averaging hidden behind compute.
//   diloco                 DiLoCo (Douillard et al. 2023): each peer steps its own copy of the model with the
//                          recipe's optimizer every `inner_batch_size` of its own samples (inner steps, local
//                          optimizer state). When the swarm has processed target_batch_size samples (the outer
//                          batch, counted in the progress records exactly as the global batch is), peers
//                          average the pseudo-gradient Δ = θ_outer − θ_local, weighted by samples, through the
//                          same all-reduce and codecs, and apply an outer SGD step with Nesterov momentum to
//                          θ_outer; every peer then restarts its inner steps from the new θ_outer. Traffic per
//                          sample falls by the outer batch over a synchronous run's global batch.
//
// With one inner SGD step per outer step (inner_batch_size at least a peer's share of the outer batch),
// outer_lr 1 and outer_momentum 0, diloco computes exactly the synchronous run's steps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dedloc/core/config.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::train {

enum class CollaborationMode { kSynchronous, kDelayed, kDiloco };

std::string_view to_string(CollaborationMode mode);  // "synchronous", "delayed", "diloco"

struct CollaborationOptions {
  CollaborationMode mode = CollaborationMode::kSynchronous;
  // diloco: samples of this peer per inner step; the outer step applies what is left over first.
  std::uint64_t inner_batch_size = 512;
  // diloco: the outer optimizer, SGD with Nesterov momentum (the DiLoCo paper's defaults).
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  bool outer_nesterov = true;
  // Every mode: a peer whose parameter hash disagrees with the majority of the swarm at its epoch downloads
  // a donor's state (collab/divergence.hpp). Off for runs whose groups are meant to be smaller than the swarm.
  bool resync_divergent = true;
  // Synchronous: a peer whose search found no group while the other peers averaged its round without it (a
  // joiner, a peer back from a lost relay, one whose batch came a moment late) waits for that round to end
  // and loads its result, the swarm's state, instead of stepping alone on its own gradients: a step nobody
  // else took, on a sliver of the batch, that leaves its parameters apart from everyone's. It waits at most
  // a matchmaking window and the round's deadline, then steps alone as before (Trainer::sit_out_missed_round).
  // Off by default for now: the lab's recipes turn it on (bench/lab/README.md has what it did there), while
  // small swarms on a loaded machine still showed timing it changes (docs/recipes.md, "A round missed").
  bool sit_out_missed_rounds = false;
  // Synchronous, sitting a round out: while it downloads that round's result, the peer is already in the
  // next round's group (it declared itself before waiting). Arriving only after the download, it would hold
  // that group up by the download's length whenever the download outlasts the next batch. Instead it takes
  // part in that round at weight 0 in the background (its reducer share served, nothing of its own added),
  // and steps with the round's average once the download landed: no second download, and nobody waits.
  //   auto    when its last download took longer than the swarm's ETA for the next batch
  //   always  every time (tests use it on loopback, where downloads take milliseconds)
  //   never   arrive after the download and contribute its own gradients, as before
  enum class ZeroWeightNextRound { kAuto, kAlways, kNever };
  ZeroWeightNextRound zero_weight_next_round = ZeroWeightNextRound::kAuto;
};

// Reads the "collaboration:" section (absent: synchronous); errors name the key and the file.
Result<CollaborationOptions> read_collaboration_options(ConfigReader section);

}  // namespace dedloc::train
