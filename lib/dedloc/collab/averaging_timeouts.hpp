// Matchmaking's waits and the all-reduce's timeouts learned from what a run observes, instead of the
// recipe's fixed numbers (tuned for one network, and usually wrong for the next): the recipe's numbers are
// ceilings, and each wait is a DeadlineEstimator (collab/deadline_estimator.hpp: median + k·MAD, at least
// factor·median, a timeout doubles it, two in a row start its memory over) over its own observations:
//
//   matchmaking_time  from how long finding a group took (search start to group), floor 1 s;
//   grace             how long a leader whose group holds a quorum of the expected peers waits for the
//                     rest (avg/group_formation.hpp, Search::grace), from how long the last expected
//                     joiners took after the quorum in groups that filled; a join that came after a grace
//                     had formed its group (a live peer left out) counts as a timeout and doubles it. Until
//                     3 such rounds, half the matchmaking ceiling (a prior, not the ceiling: a member that
//                     died while computing must not cost the whole matchmaking time before anyone learned);
//   sender_timeout    from the slowest part round trip of each round (a part's trip includes waiting at its
//                     reducer for the slowest sender's copy, so it covers a straggler), factor 4, floor 1 s,
//                     and never below the link floor: twice the time the slowest upload the swarm publishes
//                     takes to send a round's payload (link_floor()). Group buckets change every round, so
//                     rounds among fast peers taught a timeout that cut the parts of the next group's
//                     volunteer behind a 20 Mbit/s upload (bench/lab/README.md, "Newcomers and aux peers");
//                     a member that died is still found by the liveness pings, not by this timeout;
//   reducer_timeout   sender_timeout plus that estimate again (a reducer holds an answer while it waits
//                     out a slow sender), within the recipe's reducer_timeout;
//   liveness_timeout  how long a member we wait on may leave a ping unanswered before it is gone
//                     (avg/all_reduce.hpp): the part estimate, at most the sender timeout; 5 s (or the
//                     sender ceiling, if less) until 3 rounds were measured.
//
// Sans-IO: observations in, times out; the trainer measures (train/trainer.cpp) and tests replay recorded
// sequences (tests/unit/collab/averaging_timeouts_test.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "dedloc/collab/deadline_estimator.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/core/clock.hpp"

namespace dedloc::collab {

struct AveragingTimeoutsOptions {
  // The recipe's numbers: never more.
  Duration matchmaking_ceiling = std::chrono::seconds(5);
  Duration sender_ceiling = std::chrono::seconds(15);
  Duration reducer_ceiling = std::chrono::seconds(30);
  // Never less: DHT lookups and a join take a few round trips, a ping must survive a loaded machine.
  Duration matchmaking_floor = std::chrono::seconds(1);
  Duration grace_floor = std::chrono::milliseconds(500);
  Duration part_floor = std::chrono::seconds(1);
};

// One round's waits.
struct AveragingTimes {
  Duration matchmaking_time{};
  Duration grace{};
  Duration sender_timeout{};
  Duration reducer_timeout{};
  Duration liveness_timeout{};
};

class AveragingTimeouts {
 public:
  explicit AveragingTimeouts(AveragingTimeoutsOptions options = {});

  // A search found a group `took` after it started (not one found ahead: that includes our computing).
  void observe_matchmaking(Duration took);
  // A search ended without a group although other peers were known to be in the run.
  void observe_no_group();
  // A group we led filled: the last expected peer joined `after` the quorum was in.
  void observe_quorum_to_full(Duration after);
  // Joins came after a grace had formed their group without them: the grace was too short.
  void observe_late_joiners();
  // A round's slowest part round trip (AllReduceResult::slowest_part), when a part came back at all.
  void observe_slowest_part(Duration trip);
  // A round in which a live member was banned or given up on by a timeout (not one known gone).
  void observe_part_timeout();
  // The link floor under the sender timeout (link_floor()), within the sender ceiling; zero: none.
  void set_link_floor(Duration floor) { link_floor_ = floor; }

  AveragingTimes times() const;

  const DeadlineEstimator& matchmaking() const { return matchmaking_; }
  const DeadlineEstimator& grace() const { return grace_; }
  const DeadlineEstimator& parts() const { return parts_; }

 private:
  AveragingTimeoutsOptions options_;
  DeadlineEstimator matchmaking_, grace_, parts_;
  Duration link_floor_{};
};

// Twice the time the slowest upload among the trainers' records (their "bw", bytes/s) and ours takes to send
// `payload_bytes`, a round's parts as encoded; zero when no bandwidth is known.
Duration link_floor(const std::vector<PeerProgress>& records, double own_bandwidth, std::size_t payload_bytes);

}  // namespace dedloc::collab
