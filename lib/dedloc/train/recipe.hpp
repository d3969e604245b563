// Recipes: one YAML file that says what a run trains and how (recipes/*.yaml, docs/recipes.md).
//
//   run_id: mlp-demo            # peers with the same run id train together (--run-id overrides)
//   seed: 1                     # initial parameters (the same on every peer)
//   model: {kind: mlp, ...}     # read by the model's task (models/*_task.hpp)
//   data:  {kind: regression, ...}
//   training: {target_batch_size: 1024, micro_batch_size: 32, max_grad_norm: 1.0, checkpoint_every: 50}
//   collaboration: {mode: diloco, inner_batch_size: 512, outer_lr: 0.7, outer_momentum: 0.9}  (default synchronous)
//   optimizer: {kind: lamb, weight_decay: 0.01, ...}
//   schedule: {kind: linear, lr: 0.00176, warmup_epochs: 50, total_epochs: 1000}
//   averaging: {target_group_size: 16, matchmaking_time: 5, averaging_timeout: 60, codec: fp16, ...}
//
// Every key is checked when the recipe is loaded, the task's sections too: an unknown or mistyped one is
// an error naming the key and the file, before any model is built or any peer is contacted.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dedloc/avg/centered_clip.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/defaults.hpp"
#include "dedloc/core/config.hpp"
#include "dedloc/train/collaboration_mode.hpp"
#include "dedloc/train/optimizer.hpp"
#include "dedloc/train/schedule.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train {

struct TrainingOptions {
  std::uint64_t target_batch_size = 1024;  // samples the swarm gathers per global step
  std::int64_t micro_batch_size = 32;      // samples per forward/backward on this peer
  double max_grad_norm = 0;                // per micro-step clipping of the gradient norm; 0: none
  std::uint64_t checkpoint_every = 0;      // epochs between checkpoints (with --checkpoint-dir); 0: at exit only
  // Epochs between averaging the parameters themselves (after that epoch's step), which repairs the drift
  // of peers that once stepped with their own gradients or diverged otherwise; 0: never.
  std::uint64_t average_parameters_every = 0;
  // Synchronous: when the others' micro-batches that end before another of ours would complete the swarm's
  // global batch without it, wait for them (at most one micro-batch's time per step) instead of starting
  // one the whole group then waits for; false: compute until the batch is there.
  bool wait_for_due_batch = true;
};

struct AveragingRecipe {
  size_t target_group_size = avg::kDefaultTargetGroupSize;
  size_t min_group_size = avg::kDefaultMinGroupSize;
  double matchmaking_time = std::chrono::duration<double>(avg::kDefaultMatchmakingTime).count();  // seconds
  bool match_ahead = true;         // look for the group while the last micro-batches compute (TrainerOptions)
  bool group_buckets = true;       // split a swarm larger than a group into buckets, anew each round (TrainerOptions)
  bool across_buckets = true;      // ... then average the buckets' averages across them (TrainerOptions)
  double averaging_timeout = 60;   // seconds, one all-reduce
  // Each round's all-reduce deadline from the rounds observed (collab/deadline_estimator.hpp), with
  // averaging_timeout as its ceiling and 1 s as its floor, and matchmaking's time and quorum grace and the
  // sender, reducer and liveness timeouts learned likewise with matchmaking_time, sender_timeout and
  // reducer_timeout as their ceilings (collab/averaging_timeouts.hpp); false: the fixed numbers.
  bool adaptive_timeout = true;
  double sender_timeout = 15;
  double reducer_timeout = 30;
  avg::Codec codec = avg::Codec::kNone;  // a name from core/codec_id.hpp: none | fp16 | scaled-fp16 | uint8 | blockwise8
  // This peer's bandwidth each way, for the leader's shares: a home link by default, slower than the
  // averaging default (avg::kDefaultBandwidth), which is what an aux server lends.
  double bandwidth_mbit = 100;
  // averaging.shares: how a group this peer leads splits the vector. planned (the default): the planner's
  // shares over the members' bandwidths; equal: the same share for every reducer, the naive split.
  bool equal_shares = false;
  // averaging.centered_clip: {tau, iterations}: robust aggregation of the parts this peer reduces
  // (avg/centered_clip.hpp); absent: the plain weighted mean.
  std::optional<avg::CenteredClipOptions> centered_clip;
};

class Recipe {
 public:
  // Reads and checks everything, the model and data sections with the task's reader (task_registry.hpp).
  static Result<Recipe> load(const std::string& path);

  // Builds the task the recipe names (model.kind). What libtorch throws on the way (a device out of
  // memory) is an error too (train/torch_errors.hpp).
  Result<std::unique_ptr<Task>> build_task(const TaskContext& context) const;

  std::string path;
  std::string run_id;
  std::uint64_t seed = 0;
  std::string model_kind;
  TrainingOptions training;
  CollaborationOptions collaboration;
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  AveragingRecipe averaging;

 private:
  Recipe() = default;
  std::function<Result<std::unique_ptr<Task>>(const TaskContext&)> build_task_;  // from the task's reader
};

}  // namespace dedloc::train
