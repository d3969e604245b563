#include "dedloc/train/task_registry.hpp"

#include <functional>
#include <map>

#include "dedloc/train/models/albert_task.hpp"
#include "dedloc/train/models/mlp_task.hpp"
#include "dedloc/train/models/swav_task.hpp"

namespace dedloc::train {

namespace {

using Factory = std::function<Result<std::unique_ptr<Task>>(ConfigReader, ConfigReader, const TaskContext&,
                                                             const CheckRecipeKeys&)>;

// For tasks whose building is quick: build, then report unknown keys.
template <auto make>
Result<std::unique_ptr<Task>> build_then_check(ConfigReader model, ConfigReader data, const TaskContext& context,
                                               const CheckRecipeKeys& check_keys) {
  auto task = make(std::move(model), std::move(data), context);
  if (!task) return task.status();
  DEDLOC_RETURN_IF_ERROR(check_keys());
  return task;
}

// ALBERT may train a tokenizer over the whole corpus first: the recipe is checked before that.
Result<std::unique_ptr<Task>> build_albert(ConfigReader model, ConfigReader data, const TaskContext& context,
                                           const CheckRecipeKeys& check_keys) {
  auto recipe = read_albert_recipe(std::move(model), std::move(data));
  if (!recipe) return recipe.status();
  DEDLOC_RETURN_IF_ERROR(check_keys());
  auto task = make_albert_task(*recipe, context);
  if (!task) return task.status();
  return std::unique_ptr<Task>(std::move(*task));
}

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> all = {
      {"albert", build_albert},
      {"mlp", build_then_check<make_mlp_task>},
      {"swav", build_then_check<models::make_swav_task>},
  };
  return all;
}

}  // namespace

bool has_task_kind(const std::string& kind) { return factories().count(kind) > 0; }

std::string known_task_kinds() {
  std::string out;
  for (const auto& [kind, factory] : factories()) out += (out.empty() ? "" : ", ") + kind;
  return out;
}

Result<std::unique_ptr<Task>> make_task(const std::string& kind, ConfigReader model, ConfigReader data,
                                        const TaskContext& context, const CheckRecipeKeys& check_keys) {
  auto it = factories().find(kind);
  if (it == factories().end()) return error(Code::kInvalidArgument, "unknown model kind '" + kind + "' (one of " + known_task_kinds() + ")");
  return it->second(std::move(model), std::move(data), context, check_keys);
}

}  // namespace dedloc::train
