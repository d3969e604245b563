// The averaging deadline learned from observed rounds (collab/deadline_estimator.hpp), on sequences of
// round durations shaped like those the lab measured (bench/lab/README.md): 8-peer all-reduces that take
// about 0.45 s at 20 ms round trips and about 3.3 s at 300 ms, a straggler that triples some rounds, a move
// from the first network to the second, and a member that dies.
#include <catch2/catch.hpp>

#include <vector>

#include "dedloc/collab/deadline_estimator.hpp"

using namespace dedloc;
using namespace dedloc::collab;
using namespace std::chrono_literals;

namespace {

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

// Durations in seconds, observed in order.
void observe_all(DeadlineEstimator& estimator, const std::vector<double>& durations) {
  for (double d : durations) estimator.observe(from_seconds(d));
}

// 20 ms round trips: 0.45 s rounds with a few percent of jitter.
const std::vector<double> kFast = {0.44, 0.47, 0.45, 0.43, 0.46, 0.45, 0.48, 0.44, 0.45, 0.46, 0.44, 0.45};
// 300 ms round trips: 3.3 s rounds.
const std::vector<double> kSlow = {3.31, 3.42, 3.25, 3.38, 3.30, 3.29, 3.45, 3.33, 3.27, 3.36, 3.31, 3.40};

DeadlineEstimatorOptions recipe_bounds() {
  DeadlineEstimatorOptions options;
  options.floor = 1s;
  options.ceiling = 30s;  // a recipe's averaging_timeout
  return options;
}

}  // namespace

TEST_CASE("Deadline estimator: the recipe's timeout until enough rounds were seen", "[unit][deadline]") {
  DeadlineEstimator estimator(recipe_bounds());
  CHECK(estimator.deadline() == 30s);
  observe_all(estimator, {3.3, 3.4, 3.2, 3.3});
  CHECK(estimator.deadline() == 30s);  // 4 of 5
  estimator.observe(from_seconds(3.3));
  CHECK(seconds(estimator.deadline()) < 10);
}

TEST_CASE("Deadline estimator: short links give short deadlines, long links long ones, within the bounds",
          "[unit][deadline]") {
  DeadlineEstimator fast(recipe_bounds()), slow(recipe_bounds());
  observe_all(fast, kFast);
  observe_all(slow, kSlow);
  // 2 x 0.45 s = 0.9 s: the floor of 1 s holds.
  CHECK(fast.deadline() == 1s);
  // About 2 x 3.3 s: every one of these rounds fits, with room for their jitter, and far below 30 s.
  CHECK(seconds(slow.median()) == Approx(3.32).epsilon(0.01));
  CHECK(seconds(slow.deadline()) == Approx(6.64).epsilon(0.02));
  for (double d : kSlow) CHECK(d < seconds(slow.deadline()));
  // The ceiling holds too: a network ten times slower still waits no longer than the recipe allows.
  DeadlineEstimator slower(recipe_bounds());
  for (double d : kSlow) slower.observe(from_seconds(10 * d));
  CHECK(slower.deadline() == 30s);
}

TEST_CASE("Deadline estimator: a straggler's slower rounds widen the deadline enough to keep them",
          "[unit][deadline]") {
  // One member three times slower joins every third round: those rounds take 3x as long.
  std::vector<double> rounds;
  for (size_t i = 0; i < 24; ++i) rounds.push_back(i % 3 == 2 ? 3 * 3.3 : 3.3);
  DeadlineEstimator estimator(recipe_bounds());
  observe_all(estimator, rounds);
  // Median 3.3 s, MAD 0, but twice the median would cut the straggler's 9.9 s rounds: the spread must come in.
  // With one round in three slow, the median absolute deviation stays 0, so the factor decides (6.6 s)...
  CHECK(seconds(estimator.deadline()) == Approx(6.6));
  // ... and those rounds time out; each timeout doubles the next deadline until one completes again.
  estimator.observe_timeout();
  CHECK(seconds(estimator.deadline()) == Approx(13.2));
  CHECK(13.2 > 3 * 3.3);  // the straggler's round now fits
  // Once half the rounds are the straggler's, the median itself moves and the deadline keeps them.
  DeadlineEstimator half(recipe_bounds());
  std::vector<double> alternating;
  for (size_t i = 0; i < 24; ++i) alternating.push_back(i % 2 ? 3 * 3.3 : 3.3);
  observe_all(half, alternating);
  CHECK(seconds(half.deadline()) > 3 * 3.3);
}

TEST_CASE("Deadline estimator: a move to a slower network times out a few rounds, then learns it", "[unit][deadline]") {
  DeadlineEstimator estimator(recipe_bounds());
  observe_all(estimator, kFast);
  int timeouts = 0;
  // The same swarm, now 300 ms apart: a round completes only once its deadline exceeds its duration.
  for (double d : kSlow) {
    if (d > seconds(estimator.deadline())) {
      estimator.observe_timeout();
      ++timeouts;
    } else {
      estimator.observe(from_seconds(d));
    }
  }
  // 1 s, 2 s: two timed out; the third round (deadline 4 s) completed and started the memory over, the
  // recipe's timeout held for the next four, and from the fifth new round on the deadline is the new network's.
  CHECK(timeouts == 2);
  CHECK(estimator.samples() == kSlow.size() - 2);
  CHECK(seconds(estimator.deadline()) == Approx(2 * 3.335).epsilon(0.02));
  for (double d : kSlow) CHECK(d < seconds(estimator.deadline()));
}

TEST_CASE("Deadline estimator: a dead member costs a round about twice its median, not the recipe's timeout",
          "[unit][deadline]") {
  DeadlineEstimator estimator(recipe_bounds());
  observe_all(estimator, kSlow);
  // The round with the dead member runs until the deadline (its reducer never answers).
  const double cost = seconds(estimator.deadline());
  CHECK(cost <= 2.1 * seconds(estimator.median()));
  CHECK(cost < 30);
  // One such round (a timeout) doubles the next deadline, in case the network changed; the round after it
  // completes as usual and the estimate is back, the memory of the network kept.
  estimator.observe_timeout();
  CHECK(seconds(estimator.deadline()) == Approx(2 * cost));
  estimator.observe(from_seconds(3.3));
  CHECK(seconds(estimator.deadline()) == Approx(cost).epsilon(0.02));
  CHECK(estimator.samples() == kSlow.size() + 1);
}

TEST_CASE("Deadline estimator: one slow round does not move the deadline much (the median and its MAD)",
          "[unit][deadline]") {
  DeadlineEstimator estimator(recipe_bounds());
  observe_all(estimator, kSlow);
  const double before = seconds(estimator.deadline());
  estimator.observe(from_seconds(25));  // a round that waited on a stalled peer
  CHECK(seconds(estimator.deadline()) == Approx(before).epsilon(0.05));
  // The window forgets: after 32 more rounds only they count.
  DeadlineEstimatorOptions options = recipe_bounds();
  options.window = 4;
  DeadlineEstimator short_memory(options);
  options.min_samples = 1;
  DeadlineEstimator eager(options);
  observe_all(short_memory, {25, 25, 25, 25, 3.3, 3.3, 3.3, 3.3});
  CHECK(short_memory.samples() == 4);
  CHECK(seconds(short_memory.median()) == Approx(3.3));
  eager.observe(from_seconds(3.3));
  CHECK(seconds(eager.deadline()) == Approx(6.6));
}

TEST_CASE("Deadline estimator: a newcomer starts from the swarm's published figures, then from its own rounds, the swarm's a floor if set",
          "[unit][deadline]") {
  DeadlineEstimator joiner(recipe_bounds());
  // The others' rounds take 3.3 s give or take 0.05 s: the first round already gets about 2 x 3.3 s.
  joiner.seed(from_seconds(3.3), from_seconds(0.05));
  CHECK(seconds(joiner.deadline()) == Approx(6.6).epsilon(0.01));
  // A timeout still doubles it (the swarm's figures were wrong for us).
  joiner.observe_timeout();
  CHECK(seconds(joiner.deadline()) == Approx(13.2).epsilon(0.01));
  // Once five rounds of its own completed, they decide, whatever was published as a prior.
  observe_all(joiner, {0.44, 0.47, 0.45, 0.43, 0.46});
  CHECK(joiner.learned());
  CHECK(joiner.deadline() == 1s);
  // Unless the swarm's figures are a floor (the trainer sets one): rounds of its own far shorter than the
  // swarm's were in far smaller groups, and a deadline learned there would cut the swarm's rounds short.
  joiner.floor_at(from_seconds(3.3), from_seconds(0.05));
  CHECK(seconds(joiner.deadline()) == Approx(6.6).epsilon(0.01));
  joiner.floor_at(Duration::zero(), Duration::zero());  // nobody publishes any more: our own rounds alone
  CHECK(joiner.deadline() == 1s);
  // Rounds of its own longer than the floor: its own decide (2 x the median of 2 s).
  DeadlineEstimator slower(recipe_bounds());
  slower.floor_at(from_seconds(0.2), from_seconds(0.01));
  observe_all(slower, {2.0, 2.0, 2.0, 2.0, 2.0});
  CHECK(seconds(slower.deadline()) == Approx(4.0).epsilon(0.01));
  // Nothing published (a median of 0): the recipe's timeout, as before any seed.
  DeadlineEstimator alone(recipe_bounds());
  alone.seed(Duration::zero(), from_seconds(1));
  CHECK(alone.deadline() == 30s);
}

TEST_CASE("Deadline estimator: the swarm's figures are the medians of what the other peers published", "[unit][deadline]") {
  auto published = [](double median, double mad) {
    wire::ProgressRecord r;
    r.round_seconds = median;
    r.round_mad_seconds = mad;
    return r;
  };
  // Three peers published (one of them far off), one did not: medians 3.3 s and 0.05 s.
  const std::vector<wire::ProgressRecord> others{published(3.2, 0.04), published(3.3, 0.05), published(30, 9),
                                                 wire::ProgressRecord{}};
  DeadlineEstimator joiner(recipe_bounds());
  follow_swarm_figures(joiner, others);
  CHECK(seconds(joiner.deadline()) == Approx(6.6).epsilon(0.01));
  // Its own far shorter rounds decide the estimate, but the swarm's stays a floor.
  observe_all(joiner, {0.44, 0.47, 0.45, 0.43, 0.46});
  CHECK(seconds(joiner.deadline()) == Approx(6.6).epsilon(0.01));
  // Nobody publishes any more: the floor goes, its own rounds alone.
  follow_swarm_figures(joiner, {wire::ProgressRecord{}});
  CHECK(joiner.deadline() == 1s);
}
