#include "dedloc/collab/deadline_estimator.hpp"

#include <algorithm>
#include <vector>

namespace dedloc::collab {

namespace {

Duration median_of(std::vector<Duration> values) {
  if (values.empty()) return Duration::zero();
  const size_t middle = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle), values.end());
  Duration upper = values[middle];
  if (values.size() % 2 == 1) return upper;
  Duration lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(middle));
  return lower + (upper - lower) / 2;
}

}  // namespace

DeadlineEstimator::DeadlineEstimator(DeadlineEstimatorOptions options) : options_(options) {
  options_.window = std::max<std::size_t>(options_.window, 1);
  options_.ceiling = std::max(options_.ceiling, options_.floor);
}

void DeadlineEstimator::observe(Duration duration) {
  // The first round to complete after two or more timeouts in a row: the network changed, and what was
  // remembered describes the old one (its median would bring back the deadline that just failed). Start
  // over from this round. One timeout alone is a round that lost a member: the network is the same.
  if (timeouts_in_a_row_ >= 2) durations_.clear();
  durations_.push_back(duration);
  if (durations_.size() > options_.window) durations_.pop_front();
  timeouts_in_a_row_ = 0;
}

void DeadlineEstimator::observe_timeout() { ++timeouts_in_a_row_; }

Duration DeadlineEstimator::median() const { return median_of({durations_.begin(), durations_.end()}); }

Duration DeadlineEstimator::mad() const {
  const Duration m = median();
  std::vector<Duration> deviations;
  for (Duration d : durations_) deviations.push_back(d > m ? d - m : m - d);
  return median_of(std::move(deviations));
}

void DeadlineEstimator::seed(Duration median, Duration mad) {
  seed_ = Figures::of(median, mad);
}

void DeadlineEstimator::floor_at(Duration median, Duration mad) {
  floor_ = Figures::of(median, mad);
}

DeadlineEstimator::Figures DeadlineEstimator::Figures::of(Duration median, Duration mad) {
  if (median <= Duration::zero()) return {};
  return {median, std::max(mad, Duration::zero())};
}

Duration DeadlineEstimator::deadline() const {
  const bool own = durations_.size() >= options_.min_samples;
  if (!own && !seed_.known()) return options_.ceiling;
  const auto formula = [&](const Figures& figures) {
    const double m = std::chrono::duration<double>(figures.median).count();
    const double spread = std::chrono::duration<double>(figures.mad).count();
    return std::max(m + options_.k * spread, options_.factor * m);
  };
  double typical = formula(own ? Figures{median(), mad()} : seed_);
  if (floor_.known()) typical = std::max(typical, formula(floor_));
  const double growth = static_cast<double>(std::uint64_t{1} << std::min<std::size_t>(timeouts_in_a_row_, 20));
  const double estimate = typical * growth;
  const Duration wanted = from_seconds(std::min(estimate, std::chrono::duration<double>(options_.ceiling).count()));
  return std::clamp(wanted, options_.floor, options_.ceiling);
}

void follow_swarm_figures(DeadlineEstimator& estimator, const std::vector<wire::ProgressRecord>& others) {
  std::vector<Duration> medians, mads;
  for (const auto& record : others) {
    if (record.round_seconds <= 0) continue;
    medians.push_back(from_seconds(record.round_seconds));
    mads.push_back(from_seconds(record.round_mad_seconds));
  }
  if (medians.empty()) {
    estimator.floor_at(Duration::zero(), Duration::zero());
    return;
  }
  const Duration median = median_of(std::move(medians)), mad = median_of(std::move(mads));
  estimator.seed(median, mad);  // counts only until our own rounds decide
  estimator.floor_at(median, mad);
}

}  // namespace dedloc::collab
