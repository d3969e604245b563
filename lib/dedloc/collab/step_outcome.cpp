#include "dedloc/collab/step_outcome.hpp"

#include <sstream>

namespace dedloc::collab {

bool should_average(bool local_gradients_finite, size_t other_trainers) {
  return local_gradients_finite && other_trainers > 0;
}

StepOutcome classify_step(const StepFacts& facts) {
  if (!facts.local_gradients_finite) return StepOutcome::kSkippedLocal;
  if (facts.other_trainers == 0 || facts.averaging == StepAveraging::kNotTried) return StepOutcome::kAlone;
  // A failed round's buffer is restored to our own gradients, which were finite: only an average can be
  // non-finite here, but the check is on what would be applied, whatever produced it.
  if (!facts.result_finite) return StepOutcome::kSkippedAverage;
  const bool averaged = facts.averaging == StepAveraging::kGroup || facts.averaging == StepAveraging::kTaken;
  return averaged ? StepOutcome::kAveraged : StepOutcome::kLocal;
}

bool applies(StepOutcome outcome) {
  return outcome != StepOutcome::kSkippedLocal && outcome != StepOutcome::kSkippedAverage;
}

bool averaged_with_swarm(const StepFacts& facts) {
  return classify_step(facts) == StepOutcome::kAveraged && facts.averaged_fraction >= 1 &&
         (2 * facts.group_size > facts.other_trainers + 1 || facts.buckets > 1);
}

std::string describe_step(const StepFacts& facts, StepOutcome outcome) {
  switch (outcome) {
    case StepOutcome::kSkippedLocal: return "skipped: our accumulated gradients are not finite";
    case StepOutcome::kSkippedAverage: return "skipped: the averaged gradients are not finite";
    case StepOutcome::kAlone: return "alone (no other peer in the run)";
    case StepOutcome::kLocal:
      return facts.averaging == StepAveraging::kFailed ? "with local gradients: averaging failed: " + facts.why_not_averaged
                                                       : "with local gradients: " + facts.why_not_averaged;
    case StepOutcome::kAveraged: {
      std::ostringstream text;
      if (facts.averaging == StepAveraging::kTaken) {
        text << "took the result of " << facts.taken_buckets << " bucket(s) from " << facts.taken_from
             << " (the round went on without us: our samples are not in it)";
        return text.str();
      }
      text << "averaged in a group of " << facts.group_size << (facts.found_ahead ? " (found ahead)" : "");
      if (facts.averaged_fraction < 1) text << " (" << 100 * facts.averaged_fraction << "% averaged)";
      if (facts.buckets > 1) text << ", then across " << facts.buckets << " buckets";
      return text.str();
    }
  }
  return "?";
}

}  // namespace dedloc::collab
