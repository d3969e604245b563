// The monitor peer (`dedloc-avg monitor`): polls a run's progress and metrics records, keeps the picture
// (swarm_view.hpp), the history (history.hpp) and the dashboard's documents (dashboard_server.hpp) current.
// Reads only: it never takes part in averaging, so it may run anywhere, next to the bootstrap node as in
// DeDLOC's public runs.
#pragma once

#include <string>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/monitor/dashboard_server.hpp"
#include "dedloc/monitor/exposition.hpp"
#include "dedloc/monitor/history.hpp"
#include "dedloc/monitor/swarm_view.hpp"

namespace dedloc::monitor {

class Monitor {
 public:
  // `dashboard` may be null (no --http); it must outlive the monitor.
  Monitor(dht::Node& node, std::string run_id, History history, DashboardServer* dashboard = nullptr);

  // Reads the run's records once and updates the view, the history and the dashboard; true when the history
  // gained a row. The DHT's error when the read failed (the last view stays, and the failure is counted); a
  // history write error otherwise.
  Result<bool> poll(Deadline deadline);

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
