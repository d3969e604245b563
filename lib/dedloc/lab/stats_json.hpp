// The emulator's counters as JSON (dedloc-lab's output, the lab benchmarks' records).
#pragma once

#include <nlohmann/json.hpp>

#include "dedloc/lab/emulator.hpp"

namespace dedloc::lab {

// {"packets":…, "bytes":…, "dropped":{…}, "cpu_s":…, "wall_s":…, "cpu_s_per_gbit":…, "hosts":[{…}, …]}
nlohmann::json stats_json(const EmulatorStats& stats);

}  // namespace dedloc::lab
