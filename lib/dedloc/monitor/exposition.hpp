// How a monitor shows the swarm to the outside: /api/state (JSON, for the dashboard and scripts) and
// /metrics (Prometheus text), both from one SwarmView. The field and metric names are documented in
// docs/operators.md ("Monitoring") and are an interface: add, do not rename.
#pragma once

#include <cstdint>
#include <string>

#include "dedloc/monitor/swarm_view.hpp"

namespace dedloc::monitor {

// The monitor's own health, exported beside the swarm's numbers.
struct MonitorCounters {
  std::uint64_t polls = 0;          // DHT reads that succeeded
  std::uint64_t poll_errors = 0;    // DHT reads that failed
  double last_poll_time = 0;        // unix seconds of the last successful read
};

std::string state_json(const std::string& run_id, const SwarmView& view, const MonitorCounters& counters);
std::string metrics_text(const std::string& run_id, const SwarmView& view, const MonitorCounters& counters);

}  // namespace dedloc::monitor
