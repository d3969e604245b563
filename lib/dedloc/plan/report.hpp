// Renders a collaboration plan for people (a table) and for programs (JSON). Pure functions of the plan.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/plan/collaboration_plan.hpp"

namespace dedloc::plan {

// "compute+aggregate", "compute", "aggregate" or "idle".
std::string_view role_name(const PeerRole& role);

// The per-peer table, the prediction and its bottleneck, then every classic strategy with the speedup of
// the plan over it.
std::string format_plan_table(const CollaborationPlan& plan);

// The same content as JSON (rates in bytes/s, times in seconds).
nlohmann::json plan_to_json(const CollaborationPlan& plan);

}  // namespace dedloc::plan
