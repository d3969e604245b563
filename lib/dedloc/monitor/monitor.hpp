// The monitor peer (`dedloc-avg monitor`): polls a run's progress and metrics records, keeps the picture
// (swarm_view.hpp), the history (history.hpp) and the dashboard's documents (dashboard_server.hpp) current.
// Reads only: it never takes part in averaging, so it may run anywhere, next to the bootstrap node as in
// DeDLOC's public runs.
#pragma once

#include <functional>
#include <string>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/monitor/dashboard_server.hpp"
#include "dedloc/monitor/exposition.hpp"
#include "dedloc/monitor/history.hpp"
#include "dedloc/monitor/swarm_view.hpp"

namespace dedloc::monitor {

// "epoch 12: 3 peer(s) (2 trainer, 0 client, 1 aux), 512.0 samples/s, loss 1.2345, next step in 3.5 s, diloco,
// 8.0 inner steps per outer step, 1530.2 bytes/sample" (the last three when the peers say them).
std::string summary_line(const SwarmView& view);

class Monitor {
 public:
  // `dashboard` may be null (no --http); it must outlive the monitor.
  Monitor(dht::Node& node, std::string run_id, History history, DashboardServer* dashboard = nullptr);

  // Reads the run's records once and updates the view, the history and the dashboard; true when the history
  // gained a row. The DHT's error when the read failed (the last view stays, and the failure is counted); a
  // history write error otherwise.
  Result<bool> poll(Deadline deadline);

  // Polls every `interval` until `should_stop` says so (asked every 50 ms). Each new history row is logged
  // as summary_line(view()) and handed to `on_row` (the tool prints it as JSON); a failing read is logged
  // once per outage, not once per poll.
  void run(const std::function<bool()>& should_stop, Duration interval, const std::function<void()>& on_row = {});

  const SwarmView& view() const { return view_; }
  const MonitorCounters& counters() const { return counters_; }
  const History& history() const { return history_; }

 private:
  void publish();

  dht::Node& node_;
  std::string run_id_;
  History history_;
  DashboardServer* dashboard_;
  SwarmView view_;
  MonitorCounters counters_;
};

}  // namespace dedloc::monitor
