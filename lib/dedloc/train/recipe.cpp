#include "dedloc/train/recipe.hpp"

#include <set>

#include "dedloc/train/task_registry.hpp"
#include "dedloc/train/torch_errors.hpp"

namespace dedloc::train {

namespace {

const std::set<std::string> kTopLevelKeys = {"run_id", "seed", "model", "data", "training", "collaboration", "optimizer", "schedule", "averaging"};

Status invalid(const ConfigReader& where, const std::string& what) {
  return error(Code::kInvalidArgument, where.where() + ": " + what);
}

}  // namespace

Result<Recipe> Recipe::load(const std::string& path) {
  auto root = ConfigReader::from_file(path);
  if (!root) return root.status();
  Recipe recipe;
  recipe.path = path;
  ConfigReader& r = *root;
  // Top-level typos are caught now, before the task (which may take minutes to build) reads its sections.
  for (const auto& key : r.keys()) {
    if (!kTopLevelKeys.count(key)) {
      return error(Code::kInvalidArgument, path + ": unknown key '" + key + "' (known: run_id, seed, model, data, "
                                           "training, collaboration, optimizer, schedule, averaging)");
    }
  }
  r.read("run_id", recipe.run_id);
  r.read("seed", recipe.seed);
  ConfigReader model = r.section("model");
  YAML::Node kind = model.raw("kind");
  recipe.model_kind = kind && kind.IsScalar() ? kind.as<std::string>() : "";
  if (recipe.model_kind.empty()) return invalid(model, "kind: missing (one of " + known_task_kinds() + ")");
  if (!has_task_kind(recipe.model_kind)) {
    return invalid(model, "kind: unknown model '" + recipe.model_kind + "' (one of " + known_task_kinds() + ")");
  }

  ConfigReader training = r.section("training");
  training.read("target_batch_size", recipe.training.target_batch_size);
  training.read("micro_batch_size", recipe.training.micro_batch_size);
  training.read("max_grad_norm", recipe.training.max_grad_norm);
  training.read("checkpoint_every", recipe.training.checkpoint_every);
  training.read("average_parameters_every", recipe.training.average_parameters_every);
  training.read("wait_for_due_batch", recipe.training.wait_for_due_batch);
  auto collaboration = read_collaboration_options(r.section("collaboration"));
  if (!collaboration) return collaboration.status();
  recipe.collaboration = *collaboration;
  ConfigReader optimizer = r.section("optimizer");
  read_optimizer_options(optimizer, recipe.optimizer);
  ConfigReader schedule = r.section("schedule");
  read_schedule_options(schedule, recipe.schedule);
  ConfigReader averaging = r.section("averaging");
  auto& a = recipe.averaging;
  std::uint64_t group = a.target_group_size, min_group = a.min_group_size;
  std::string codec = "none";
  averaging.read("target_group_size", group);
  averaging.read("min_group_size", min_group);
  averaging.read("matchmaking_time", a.matchmaking_time);
  averaging.read("match_ahead", a.match_ahead);
  averaging.read("group_buckets", a.group_buckets);
  averaging.read("across_buckets", a.across_buckets);
  averaging.read("averaging_timeout", a.averaging_timeout);
  averaging.read("adaptive_timeout", a.adaptive_timeout);
  averaging.read("sender_timeout", a.sender_timeout);
  averaging.read("reducer_timeout", a.reducer_timeout);
  averaging.read("codec", codec);
  averaging.read("bandwidth_mbit", a.bandwidth_mbit);
  std::string shares = "planned";
  averaging.read("shares", shares);
  if (shares != "planned" && shares != "equal") {
    return invalid(averaging, "shares: '" + shares + "' is not planned or equal");
  }
  a.equal_shares = shares == "equal";
  if (averaging.has("centered_clip")) {
    ConfigReader clip = averaging.section("centered_clip");
    avg::CenteredClipOptions options;
    std::uint64_t iterations = options.iterations;
    if (!clip.has("tau")) return invalid(clip, "tau: required (the clipping radius, a length in one part's space)");
    clip.read("tau", options.tau);
    clip.read("iterations", iterations);
    options.iterations = iterations;
    if (auto checked = avg::check(options); !checked.is_ok()) return invalid(clip, checked.message());
    a.centered_clip = options;
  }
  a.target_group_size = group;
  a.min_group_size = min_group;
  // The task reads its own sections; then every key of the file has been read, and any left is unknown.
  auto build = read_task(recipe.model_kind, model, r.section("data"));
  if (!build) return build.status();
  recipe.build_task_ = std::move(*build);
  DEDLOC_RETURN_IF_ERROR(r.finish());

  if (recipe.training.target_batch_size < 1) return invalid(training, "target_batch_size must be >= 1");
  if (recipe.training.micro_batch_size < 1) return invalid(training, "micro_batch_size must be >= 1");
  if (!(recipe.training.max_grad_norm >= 0)) return invalid(training, "max_grad_norm must be >= 0 (0: no clipping)");
  DEDLOC_RETURN_IF_ERROR(check_optimizer_options(recipe.optimizer).with_context(optimizer.where()));
  DEDLOC_RETURN_IF_ERROR(check_schedule_options(recipe.schedule).with_context(schedule.where()));
  auto parsed = avg::parse_codec(codec);
  if (!parsed) return invalid(averaging, "codec: " + parsed.status().message());
  a.codec = *parsed;
  if (a.target_group_size < 2 || a.min_group_size < 1 || a.min_group_size > a.target_group_size) {
    return invalid(averaging, "need target_group_size >= 2 and 1 <= min_group_size <= target_group_size");
  }
  for (double seconds : {a.matchmaking_time, a.averaging_timeout, a.sender_timeout, a.reducer_timeout, a.bandwidth_mbit}) {
    if (!(seconds > 0)) return invalid(averaging, "times and bandwidth must be positive numbers");
  }
  return recipe;
}

Result<std::unique_ptr<Task>> Recipe::build_task(const TaskContext& context) const {
  return guard_torch("building the model", [&] { return build_task_(context); });
}

}  // namespace dedloc::train
