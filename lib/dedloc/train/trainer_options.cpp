#include "dedloc/train/trainer_options.hpp"

#include <filesystem>

namespace dedloc::train {

Result<TrainerOptions> trainer_options(const Recipe& recipe, const TrainerOverrides& o) {
  TrainerOptions options;
  options.run_id = o.run_id.empty() ? recipe.run_id : o.run_id;
  if (options.run_id.empty()) {
    return error(Code::kInvalidArgument, recipe.path + ": no run_id; give one there or with --run-id");
  }
  options.training = recipe.training;
  options.collaboration = recipe.collaboration;
  if (o.micro_batch_size > 0) options.training.micro_batch_size = o.micro_batch_size;
  options.schedule = recipe.schedule;
  const auto& r = recipe.averaging;
  auto& a = options.averaging;
  a.role = o.client_mode ? avg::AvgRole::kClient : avg::AvgRole::kNode;
  a.listen = o.avg_listen;
  if (!o.client_mode) a.announce = o.avg_announce;
  a.bandwidth = (o.bandwidth_mbit > 0 ? o.bandwidth_mbit : r.bandwidth_mbit) * 1e6 / 8;
  a.equal_shares = r.equal_shares;
  a.target_group_size = r.target_group_size;
  a.min_group_size = r.min_group_size;
  a.matchmaking_time = from_seconds(r.matchmaking_time);
  a.averaging_timeout = from_seconds(r.averaging_timeout);
  a.all_reduce.codec = r.codec;
  a.all_reduce.sender_timeout = from_seconds(r.sender_timeout);
  a.all_reduce.reducer_timeout = from_seconds(r.reducer_timeout);
  a.all_reduce.centered_clip = r.centered_clip;
  options.match_ahead = r.match_ahead;
  options.group_buckets = r.group_buckets;
  options.across_buckets = r.across_buckets;
  options.adaptive_averaging_timeout = r.adaptive_timeout;
  options.relaying.relays = o.relays;
  options.max_time_seconds = o.max_time_seconds;
  options.max_epochs = o.max_epochs;
  options.min_peers = o.min_peers;
  options.checkpoint_dir = o.checkpoint_dir;
  options.checkpoint_extra = {{"run_id", options.run_id}, {"recipe", recipe.path}, {"model", recipe.model_kind}};
  options.samples_log = o.samples_log;
  options.status_line = o.status_line;
  return options;
}

TaskContext task_context(const Recipe& recipe, const TrainerOptions& options, torch::Device device,
                         std::uint64_t data_seed, const std::string& work_dir) {
  TaskContext context;
  context.device = device;
  context.init_seed = recipe.seed;
  context.data_seed = data_seed;
  context.micro_batch_size = options.training.micro_batch_size;
  context.work_dir = work_dir;
  context.log = options.log;
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  return context;
}

}  // namespace dedloc::train
