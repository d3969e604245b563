// Runs a lab scenario (scenario.hpp): makes one lab host per process (the DHT bootstrap node, the relays,
// every peer), starts the real programs in them — dedloc-dht, dedloc-relay, dedloc-train with the recipe
// (the synthetic task for many peers), dedloc-avg aux — applies the faults on time, and measures
// (scenario_report.hpp). Every program talks plaintext: 64 peers encrypting on two cores would measure
// the CPU, not the links (what CURVE costs is measured apart: bench/README.md).
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/core/status.hpp"
#include "dedloc/lab/scenario.hpp"

namespace dedloc::lab {

struct RunnerOptions {
  std::string tools_dir;  // where dedloc-dht/, dedloc-relay/, dedloc-train/ and dedloc-avg/ are built
  std::string work_dir;   // each process's stderr (NAME.err) and stdout lines (lines.jsonl) stay here
  std::function<void(const std::string&)> progress;  // one line now and then (to stderr)
  std::string peer_log_level;  // passed to every peer's --log-level (dedloc-train, dedloc-avg); empty: theirs
};

// The report (scenario_report.hpp) as JSON. kCancelled when `interrupted` turned true (the lab is removed
// first); kUnavailable when the lab or the infrastructure cannot start.
Result<nlohmann::json> run_scenario(const Scenario& scenario, const RunnerOptions& options,
                                    const std::function<bool()>& interrupted);

}  // namespace dedloc::lab
