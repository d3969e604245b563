// Learning-rate schedules: the learning rate as a pure function of the global step (docs/recipes.md).
//
// A collaboration steps once per global batch, and every peer knows the global epoch (the number of steps
// the swarm has taken), so the learning rate is a function of that number alone: a peer that joins late or
// downloads a state computes the same rate as everyone else, with no scheduler state to transfer. Plain
// C++, no torch: dedloc-avg and the planner can show the rate too.
//
// Formulas (e = the epoch, i.e. the steps already taken, so the first step uses e = 0; W = warmup_epochs,
// T = total_epochs, lr and final = final_lr):
//
//   warmup, e < W      lr · e / W                    linear from 0; the first step (e = 0) has rate 0, as in
//                                                    transformers' get_*_schedule_with_warmup
//   constant, e ≥ W    lr                            (total_epochs and final_lr do not apply)
//   linear, W ≤ e < T  final + (lr − final) · (T − e) / (T − W)
//   cosine, W ≤ e < T  final + (lr − final) · ½ · (1 + cos(π · (e − W) / (T − W)))
//   linear or cosine,
//   e ≥ T              final
//
// Both decays start at exactly lr (e = W) and reach final at e = T, so every schedule is continuous. With
// final = 0 "linear" is transformers' get_linear_schedule_with_warmup (the hivemind ALBERT recipe) and
// "cosine" is get_cosine_schedule_with_warmup; with final > 0 "cosine" is SwAV's cosine decay (SwAV's own
// warmup starts at a small nonzero rate instead of 0).
#pragma once

#include <cstdint>
#include <string>

#include "dedloc/core/config.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::train {

struct ScheduleOptions {
  std::string kind = "constant";    // constant | linear | cosine (the formulas above)
  double lr = 0.001;                // the peak learning rate, reached at e = warmup_epochs; > 0
  std::uint64_t warmup_epochs = 0;  // W: steps of linear warmup from 0 (0: none)
  std::uint64_t total_epochs = 0;   // T: linear, cosine: the step at which the decay reaches final_lr; > W
  double final_lr = 0;              // linear, cosine: the rate from T on; 0 ≤ final_lr ≤ lr
};

// Reads the keys of a "schedule:" section into `options`: "kind" first, then lr and warmup_epochs, plus
// total_epochs and final_lr for linear and cosine. A key that does not apply to the kind is left unread, so
// the root's finish() reports it as unknown (a constant schedule with a total_epochs is a mistake, not a
// setting to ignore). Type errors are reported by finish() too.
void read_schedule_options(ConfigReader& section, ScheduleOptions& options);

// kInvalidArgument naming the bad key ("schedule.total_epochs ...") and the accepted values.
Status check_schedule_options(const ScheduleOptions& options);

// The learning rate for the step taken at `epoch` (the formulas above). `options` must pass
// check_schedule_options.
double learning_rate(const ScheduleOptions& options, std::uint64_t epoch);

}  // namespace dedloc::train
