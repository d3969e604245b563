#include "dedloc/monitor/monitor.hpp"

#include "dedloc/collab/progress.hpp"

namespace dedloc::monitor {

Monitor::Monitor(dht::Node& node, std::string run_id, History history, DashboardServer* dashboard)
    : node_(node), run_id_(std::move(run_id)), history_(std::move(history)), dashboard_(dashboard) {
  view_.time = SystemClock::instance().unix_seconds();
  publish();
}

Result<bool> Monitor::poll(Deadline deadline) {
  auto progress = collab::read_progress(node_, run_id_, deadline);
  auto metrics = progress ? collab::read_metrics(node_, run_id_, deadline) : Result<std::vector<collab::PeerMetrics>>(progress.status());
  if (!metrics) {
    ++counters_.poll_errors;
    publish();
    return metrics.status().with_context("reading the records of run '" + run_id_ + "'");
  }
  const double now = SystemClock::instance().unix_seconds();
  ++counters_.polls;
  counters_.last_poll_time = now;
  const auto last_epoch = view_.epoch;
  view_ = summarize_swarm(*progress, *metrics, now);
  if (view_.alive() == 0) view_.epoch = last_epoch;  // a run with nobody in it is paused, not back at step 0
  auto recorded = history_.record(view_);
  publish();
  return recorded;
}

void Monitor::publish() {
  if (!dashboard_) return;
  dashboard_->publish({.state_json = state_json(run_id_, view_, counters_),
                       .history_json = history_.to_json(),
                       .metrics_text = metrics_text(run_id_, view_, counters_)});
}

}  // namespace dedloc::monitor
