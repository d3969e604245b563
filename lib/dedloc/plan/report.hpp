// Renders a collaboration plan, and the modes' predictions (mode_prediction.hpp), for people (tables) and for
// programs (JSON). Pure functions of what they render.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/plan/collaboration_plan.hpp"
#include "dedloc/plan/mode_prediction.hpp"

namespace dedloc::plan {

// "compute+aggregate", "compute", "aggregate" or "idle".
std::string_view role_name(const PeerRole& role);

// The per-peer table, the prediction and its bottleneck, then every classic strategy with the speedup of
// the plan over it.
std::string format_plan_table(const CollaborationPlan& plan);

// The same content as JSON (rates in bytes/s, times in seconds).
nlohmann::json plan_to_json(const CollaborationPlan& plan);

// One mode's plan: a line naming the mode (and, for DiLoCo, the outer batch), format_plan_table of its plan
// (whose steps are then outer steps), and the bytes uploaded per sample.
std::string format_mode_plan(const ModePrediction& prediction);
// plan_to_json of its plan, plus "mode", "inner_steps", "global_batch", "averaged_batch" and
// "upload_bytes_per_sample" (swarm and per peer).
nlohmann::json mode_plan_to_json(const ModePrediction& prediction);

// Synchronous next to DiLoCo for the same peers: steps/s, samples/s, bytes uploaded per sample and the bound
// of each, then each peer's role and upload per sample in both.
std::string format_mode_comparison(const ModeComparison& comparison);
nlohmann::json mode_comparison_to_json(const ModeComparison& comparison);

}  // namespace dedloc::plan
