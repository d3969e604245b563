#include "dedloc/train/collaboration_mode.hpp"

namespace dedloc::train {

std::string_view to_string(CollaborationMode mode) {
  switch (mode) {
    case CollaborationMode::kSynchronous: return "synchronous";
    case CollaborationMode::kDelayed: return "delayed";
    case CollaborationMode::kDiloco: return "diloco";
  }
  return "?";
}

Result<CollaborationOptions> read_collaboration_options(ConfigReader section) {
  CollaborationOptions options;
  std::string mode = "synchronous";
  section.read("mode", mode);
  auto bad = [&](const std::string& what) { return error(Code::kInvalidArgument, section.where() + ": " + what); };
  bool known = false;
  for (auto candidate : {CollaborationMode::kSynchronous, CollaborationMode::kDelayed, CollaborationMode::kDiloco}) {
    if (mode == to_string(candidate)) {
      options.mode = candidate;
      known = true;
    }
  }
  if (!known) return bad("mode: '" + mode + "' is not a mode (synchronous, delayed or diloco)");
  section.read("resync_divergent", options.resync_divergent);
  section.read("sit_out_missed_rounds", options.sit_out_missed_rounds);
  std::string zero_weight = "auto";
  section.read("zero_weight_next_round", zero_weight);
  if (zero_weight == "auto") options.zero_weight_next_round = CollaborationOptions::ZeroWeightNextRound::kAuto;
  else if (zero_weight == "always") options.zero_weight_next_round = CollaborationOptions::ZeroWeightNextRound::kAlways;
  else if (zero_weight == "never") options.zero_weight_next_round = CollaborationOptions::ZeroWeightNextRound::kNever;
  else return bad("zero_weight_next_round: '" + zero_weight + "' is not auto, always or never");
  // The outer keys mean nothing to a synchronous run: given there, they are a mistake worth naming.
  for (std::string_view key : {"inner_batch_size", "outer_lr", "outer_momentum", "outer_nesterov"}) {
    if (section.has(key) && options.mode != CollaborationMode::kDiloco) {
      return bad(std::string(key) + ": only for mode diloco");
    }
  }
  section.read("inner_batch_size", options.inner_batch_size);
  section.read("outer_lr", options.outer_lr);
  section.read("outer_momentum", options.outer_momentum);
  section.read("outer_nesterov", options.outer_nesterov);
  if (options.inner_batch_size < 1) return bad("inner_batch_size must be >= 1");
  if (!(options.outer_lr > 0)) return bad("outer_lr must be > 0");
  if (!(options.outer_momentum >= 0 && options.outer_momentum < 1)) return bad("outer_momentum must be in [0, 1)");
  return options;
}

}  // namespace dedloc::train
