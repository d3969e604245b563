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

  for (auto outcome : {StepOutcome::kAveraged, StepOutcome::kAlone, StepOutcome::kLocal}) CHECK(applies(outcome));
  for (auto outcome : {StepOutcome::kSkippedLocal, StepOutcome::kSkippedAverage}) CHECK_FALSE(applies(outcome));
}
