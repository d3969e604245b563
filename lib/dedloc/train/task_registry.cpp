#include "dedloc/train/task_registry.hpp"

#include <functional>
#include <map>

#include "dedloc/train/models/mlp_task.hpp"
#include "dedloc/train/models/swav_task.hpp"

namespace dedloc::train {

namespace {

using Factory = std::function<Result<std::unique_ptr<Task>>(ConfigReader, ConfigReader, const TaskContext&)>;

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> all = {
      {"mlp", make_mlp_task},
      {"swav", models::make_swav_task},
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
                                        const TaskContext& context) {
  auto it = factories().find(kind);
  if (it == factories().end()) return error(Code::kInvalidArgument, "unknown model kind '" + kind + "' (one of " + known_task_kinds() + ")");
  return it->second(std::move(model), std::move(data), context);
}

}  // namespace dedloc::train
