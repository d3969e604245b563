// The monitor's web face: a small HTTP server (cpp-httplib) with
//   GET /              the dashboard page (dashboard/index.html: Chart.js charts of loss, throughput and peers
//                      over time and a table of the live peers), which polls the two JSON routes below
//   GET /chart.js      Chart.js, from Debian's libjs-chart.js, built into the binary (no CDN: the dashboard
//                      works on a closed network)
//   GET /api/state     the swarm now (exposition.hpp)
//   GET /api/history   the rows of history.hpp
//   GET /metrics       Prometheus text
// The monitor renders those documents once per poll and hands them over with publish(); requests only copy
// the latest ones, so a slow or hostile client never holds up the monitor, and the pages it sees are
// consistent with each other.
#pragma once

#include <memory>
#include <string>

#include "dedloc/core/status.hpp"

namespace dedloc::monitor {

struct DashboardDocuments {
  std::string state_json = "{}";
  std::string history_json = "[]";
  std::string metrics_text;
};

class DashboardServer {
 public:
  DashboardServer();
  ~DashboardServer();  // stops serving
  DashboardServer(const DashboardServer&) = delete;
  DashboardServer& operator=(const DashboardServer&) = delete;

  // Binds "HOST:PORT" (PORT 0: any free port) and serves on a thread of its own. kInvalidArgument for an
  // address that does not parse, kUnavailable naming it when it cannot be bound.
  Status start(const std::string& address);
  // The bound port (after start()).
  int port() const;
  void publish(DashboardDocuments documents);
  // Stops serving and joins the thread; requests in flight finish first, and a silent client is dropped
  // after the read timeout (3 s): stopping takes a few seconds at most. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Splits "HOST:PORT" (HOST may be empty for all interfaces, or a bracketed IPv6 address).
Result<std::pair<std::string, int>> parse_http_address(const std::string& address);

}  // namespace dedloc::monitor
