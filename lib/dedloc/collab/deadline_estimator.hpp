// A deadline learned from what a run observes, instead of a number tuned for one network in a recipe:
// each averaging round's all-reduce gets the recent rounds' typical duration plus a margin for their spread,
//
//   deadline = clamp(max(median + k·MAD, factor·median), floor, ceiling)
//
// over the last `window` completed rounds (MAD: the median absolute deviation, a spread that one slow round
// does not inflate). Until `min_samples` rounds completed, the deadline is the ceiling (the recipe's
// averaging_timeout, what a run without the estimator waits). A round cut short by its deadline tells only
// that the duration was longer (a censored observation): the next deadline doubles, up to the ceiling. The
// first round that completes after two or more timeouts in a row starts the memory over (the network changed; the old rounds'
// median would bring back the deadline that failed), so the ceiling holds again until min_samples new
// rounds. A run that moves from 20 ms to 300 ms round trips thus times out a few rounds while the deadline
// grows, then learns the new durations; a dead member costs a round about factor·median, not the ceiling.
//
// A newcomer need not start from the ceiling: peers publish their median and MAD in their progress
// records, and seed() takes the swarm's figures as the estimate until min_samples rounds of its own
// completed (the same formula over them; a timeout still doubles it). floor_at() keeps the swarm's figures
// a floor under our own after that: a peer whose rounds were all far shorter than the swarm's averaged in
// groups far smaller (a latecomer that met only aux peers for a few rounds learned 1 s in the lab, then cut
// the whole swarm's 4 s round short as a reducer: everyone else waited out their own deadline for its part).
//
// Sans-IO: durations in, a deadline out; the caller measures (train/trainer.cpp) and tests replay recorded
// sequences (tests/unit/collab/deadline_estimator_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::collab {

struct DeadlineEstimatorOptions {
  Duration floor = std::chrono::seconds(1);    // never less: a round is never cut before a second
  Duration ceiling = std::chrono::seconds(60); // never more, and the deadline before there is data
  std::size_t window = 32;                     // completed rounds remembered
  std::size_t min_samples = 5;                 // completed rounds before the estimate replaces the ceiling
  double k = 4;                                // MADs above the median
  double factor = 2;                           // and at least this multiple of the median
};

class DeadlineEstimator {
 public:
  explicit DeadlineEstimator(DeadlineEstimatorOptions options = {});

  // A round that completed in `duration`.
  void observe(Duration duration);
  // A round that its deadline cut short (its duration is unknown, and longer than the deadline).
  void observe_timeout();
  // A prior (the swarm's typical round: the median of the medians other peers published, and of their
  // MADs): the estimate while fewer than min_samples rounds of our own completed. A zero median clears it.
  void seed(Duration median, Duration mad);
  // A floor (the same figures): the deadline is never below what the formula gives over them, whatever our
  // own rounds say. A zero median clears it.
  void floor_at(Duration median, Duration mad);

  Duration deadline() const;
  std::size_t samples() const { return durations_.size(); }
  bool learned() const { return durations_.size() >= options_.min_samples; }  // our own rounds decide
  Duration median() const;  // of the remembered rounds (0 when none)
  Duration mad() const;     // their median absolute deviation from the median (0 when none)

 private:
  DeadlineEstimatorOptions options_;
  std::deque<Duration> durations_;
  std::size_t timeouts_in_a_row_ = 0;  // each doubles the deadline until a round completes
  // A round's typical duration as others published it: a median and a MAD (a zero median: none).
  struct Figures {
    Duration median{}, mad{};
    static Figures of(Duration median, Duration mad);  // a non-positive median clears both
    bool known() const { return median > Duration::zero(); }
  };
  Figures seed_;   // the prior (seed())
  Figures floor_;  // the floor (floor_at())
};

// The swarm's typical round as the other peers published it in their progress records ("rs", "rm"): the
// median of their medians and the median of their MADs, as `estimator`'s prior (until its own rounds
// decide) and its floor always. Nobody published any: no floor (the prior stays as it was). Trainers and aux
// peers both call it before each round.
void follow_swarm_figures(DeadlineEstimator& estimator, const std::vector<wire::ProgressRecord>& others);

}  // namespace dedloc::collab
