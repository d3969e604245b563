// What one global step did, decided from facts alone (docs/architecture.md, "one global step").
//
// The trainer gathers the facts (are our accumulated gradients finite, how many other trainers are in the
// run, what the averager said, is the result finite) and this file turns them into one outcome: whether the
// optimizer applies the gradients, how the step is counted, and the sentence the log shows. No torch and no
// network here, so the rules are unit-tested (tests/unit/collab/step_outcome_test.cpp).
//
//   local gradients not finite         -> kSkippedLocal      (never averaged: the group is served without them)
//   no other trainer in the run        -> kAlone             (our gradients)
//   averaging failed or found no group -> kLocal             (our gradients)
//   averaged with a group              -> kAveraged          (the group's weighted mean)
//   took a missed round's result       -> kAveraged          (the swarm's mean, without our samples)
//   any of the last two, result not finite -> kSkippedAverage (nothing applied)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dedloc::collab {

enum class StepOutcome {
  kAveraged,        // applied the group's average
  kAlone,           // no other trainer in the run: applied our own gradients
  kLocal,           // others are in the run, but averaging failed or found no group: our own gradients
  kSkippedLocal,    // nothing applied: our accumulated gradients are not finite
  kSkippedAverage,  // nothing applied: the gradients after averaging are not finite
};

// What the averager said about the step's gradient round.
enum class StepAveraging {
  kNotTried,  // not asked: our gradients were not finite, or nobody else is in the run
  kFailed,    // an error (why_not_averaged holds it)
  kNoGroup,   // no group formed in time (why_not_averaged holds the averager's reason)
  kGroup,     // averaged with group_size peers
  // The round went on without us (our bucket's group formed first, or the round ended before our batch),
  // and we took its cross-bucket stage's result from a carrier (taken_from): the step every group takes,
  // our own samples not in it.
  kTaken,
};

struct StepFacts {
  bool local_gradients_finite = true;  // our accumulated gradients, before averaging
  size_t other_trainers = 0;           // trainers in the run besides us (the tracker's count)
  StepAveraging averaging = StepAveraging::kNotTried;
  std::string why_not_averaged;        // kFailed, kNoGroup
  size_t group_size = 0;               // kGroup
  bool found_ahead = false;            // kGroup: the group formed while we still computed
  std::string group_id;                // kGroup: the group's id in hex, the same on every member
  double averaged_fraction = 1;        // kGroup: the share of the vector that was averaged (the rest is zeros)
  size_t buckets = 0;                  // kGroup, kTaken: the cross-bucket stage brought every one of these buckets' averages
  std::string taken_from;              // kTaken: the carrier whose result we took (its address)
  std::uint64_t taken_buckets = 0;     // kTaken: the buckets that result holds
  double averaging_seconds = 0;        // kGroup: how long the all-reduce took (for the step line)
  double averaging_deadline = 0;       // kGroup: the deadline it had
  double round_seconds = 0;            // the whole round after our batch: the wait for the group, then the all-reduce
  double waited_seconds = 0;           // waited for the others' micro-batches that complete the batch (instead of one more)
  bool result_finite = true;           // the gradients the optimizer would apply, after averaging
};

// Whether the step's gradients go to the averager at all.
bool should_average(bool local_gradients_finite, size_t other_trainers);

StepOutcome classify_step(const StepFacts& facts);

// Whether the optimizer applies the gradients (the epoch advances) with this outcome.
bool applies(StepOutcome outcome);

// Whether the step averaged with the swarm: the whole vector came back averaged from a group of more than
// half the run's trainers (group members that are aux peers count too: they are not told apart here), or
// from a group of one bucket whose cross-bucket stage brought every bucket's average in full. A
// group of a few, formed while the rest of the swarm formed another, averages in full yet leaves its members
// with parameters the majority does not have (collab/divergence.hpp must not take that for arithmetic that
// differs).
bool averaged_with_swarm(const StepFacts& facts);

// The log's account of the step: "averaged in a group of 3 (found ahead)", "alone (no other peer in the
// run)", "with local gradients: <why>", "skipped: ...".
std::string describe_step(const StepFacts& facts, StepOutcome outcome);

}  // namespace dedloc::collab
