// The step-outcome rules (collab/step_outcome.hpp): facts in, one outcome and one sentence out.
#include <catch2/catch.hpp>

#include "dedloc/collab/step_outcome.hpp"

using namespace dedloc::collab;

namespace {
StepFacts averaged_with(size_t group_size) {
  StepFacts facts;
  facts.other_trainers = group_size - 1;
  facts.averaging = StepAveraging::kGroup;
  facts.group_size = group_size;
  return facts;
}
}  // namespace

TEST_CASE("A step averages only finite gradients, and only when others are in the run", "[unit][collab][step]") {
  CHECK(should_average(true, 1));
  CHECK_FALSE(should_average(true, 0));
  CHECK_FALSE(should_average(false, 3));
}

TEST_CASE("Each set of facts gives one outcome, and only skipped steps apply nothing", "[unit][collab][step]") {
  StepFacts alone;
  CHECK(classify_step(alone) == StepOutcome::kAlone);
  CHECK(describe_step(alone, StepOutcome::kAlone) == "alone (no other peer in the run)");

  StepFacts not_finite;
  not_finite.local_gradients_finite = false;
  not_finite.other_trainers = 2;
  CHECK(classify_step(not_finite) == StepOutcome::kSkippedLocal);
  CHECK(describe_step(not_finite, StepOutcome::kSkippedLocal) == "skipped: our accumulated gradients are not finite");

  auto group = averaged_with(3);
  CHECK(classify_step(group) == StepOutcome::kAveraged);
  CHECK(describe_step(group, StepOutcome::kAveraged) == "averaged in a group of 3");
  group.found_ahead = true;
  group.averaged_fraction = 0.5;
  CHECK(describe_step(group, StepOutcome::kAveraged) == "averaged in a group of 3 (found ahead) (50% averaged)");

  auto diverged = averaged_with(2);
  diverged.result_finite = false;
  CHECK(classify_step(diverged) == StepOutcome::kSkippedAverage);
  CHECK(describe_step(diverged, StepOutcome::kSkippedAverage) == "skipped: the averaged gradients are not finite");

  StepFacts failed;
  failed.other_trainers = 1;
  failed.averaging = StepAveraging::kFailed;
  failed.why_not_averaged = "timeout: all-reduce";
  CHECK(classify_step(failed) == StepOutcome::kLocal);
  CHECK(describe_step(failed, StepOutcome::kLocal) == "with local gradients: averaging failed: timeout: all-reduce");

  StepFacts no_group;
  no_group.other_trainers = 4;
  no_group.averaging = StepAveraging::kNoGroup;
  no_group.why_not_averaged = "no group formed within 5 s";
  CHECK(classify_step(no_group) == StepOutcome::kLocal);
  CHECK(describe_step(no_group, StepOutcome::kLocal) == "with local gradients: no group formed within 5 s");

  StepFacts taken;
  taken.other_trainers = 9;
  taken.averaging = StepAveraging::kTaken;
  taken.taken_from = "tcp://10.0.0.7:4000";
  taken.taken_buckets = 3;
  CHECK(classify_step(taken) == StepOutcome::kAveraged);
  CHECK(describe_step(taken, StepOutcome::kAveraged) ==
        "took the result of 3 bucket(s) from tcp://10.0.0.7:4000 (the round went on without us: our samples are not "
        "in it)");
  taken.result_finite = false;
  CHECK(classify_step(taken) == StepOutcome::kSkippedAverage);

  for (auto outcome : {StepOutcome::kAveraged, StepOutcome::kAlone, StepOutcome::kLocal}) CHECK(applies(outcome));
  for (auto outcome : {StepOutcome::kSkippedLocal, StepOutcome::kSkippedAverage}) CHECK_FALSE(applies(outcome));
}

TEST_CASE("A step averaged with the swarm: in full, in a group of more than half the trainers", "[unit][collab][step]") {
  CHECK(averaged_with_swarm(averaged_with(3)));  // everyone
  auto part = averaged_with(3);
  part.averaged_fraction = 0.9;  // a reducer failed: a tenth of the vector is our own
  CHECK_FALSE(averaged_with_swarm(part));
  // The lab's part-time run: a group of 6 formed while 17 others formed theirs, in a swarm of 21 trainers.
  auto apart = averaged_with(6);
  apart.other_trainers = 20;
  CHECK_FALSE(averaged_with_swarm(apart));
  auto most = averaged_with(11);
  most.other_trainers = 20;
  CHECK(averaged_with_swarm(most));
  // A missed round's result taken from a carrier: the swarm's step when it holds every bucket, though we
  // were in no group.
  StepFacts taken;
  taken.other_trainers = 20;
  taken.averaging = StepAveraging::kTaken;
  taken.taken_buckets = 4;
  CHECK_FALSE(averaged_with_swarm(taken));
  taken.buckets = 4;
  CHECK(averaged_with_swarm(taken));
  // Two of four is not more than half.
  auto half = averaged_with(2);
  half.other_trainers = 3;
  CHECK_FALSE(averaged_with_swarm(half));
  StepFacts alone;
  CHECK_FALSE(averaged_with_swarm(alone));
}
