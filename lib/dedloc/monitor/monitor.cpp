#include "dedloc/monitor/monitor.hpp"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <thread>

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

std::string summary_line(const SwarmView& v) {
  std::ostringstream line;
  line << "epoch " << v.epoch << ": " << v.alive() << " peer(s) (" << v.trainers << " trainer, " << v.clients
       << " client, " << v.aux << " aux), " << std::fixed << std::setprecision(1) << v.samples_per_second
       << " samples/s";
  if (v.mean_loss) line << ", loss " << std::setprecision(4) << *v.mean_loss;
  if (v.eta_seconds) line << ", next step in " << std::setprecision(1) << *v.eta_seconds << " s";
  if (!v.mode.empty()) line << ", " << v.mode;
  if (v.inner_steps) line << ", " << std::setprecision(1) << *v.inner_steps << " inner steps per outer step";
  if (v.bytes_per_sample) line << ", " << std::setprecision(1) << *v.bytes_per_sample << " bytes/sample";
  return line.str();
}

void Monitor::run(const std::function<bool()>& should_stop, Duration interval, const std::function<void()>& on_row) {
  Logger& log = Logger::global();
  bool failing = false;  // say so once per outage, not once per poll
  while (!should_stop()) {
    auto polled = poll(Deadline::after(std::chrono::seconds(10)));
    if (!polled && !failing) log.warn("monitor") << polled.status().to_string();
    if (polled && failing) log.info("monitor") << "reading the run's records again";
    failing = !polled;
    if (polled && *polled) {
      log.info("monitor") << summary_line(view_);
      if (on_row) on_row();
    }
    sleep_unless(interval, should_stop);
  }
}

}  // namespace dedloc::monitor
