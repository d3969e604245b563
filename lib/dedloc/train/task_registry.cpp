#include "dedloc/train/task_registry.hpp"

#include <cstdlib>
#include <map>

#include "dedloc/train/models/albert_task.hpp"
#include "dedloc/train/models/failing_task.hpp"
#include "dedloc/train/models/mlp_task.hpp"
#include "dedloc/train/models/swav_task.hpp"
#include "dedloc/train/models/synthetic_task.hpp"
#include "dedloc/train/models/torchscript_task.hpp"

namespace dedloc::train {

namespace {

using Reader = std::function<Result<TaskBuilder>(ConfigReader, ConfigReader)>;

// A task whose options `read` reads and `make` builds from.
template <auto read, auto make>
Result<TaskBuilder> read_then_build(ConfigReader model, ConfigReader data) {
  auto options = read(std::move(model), std::move(data));
  if (!options) return options.status();
  return TaskBuilder([options = *options](const TaskContext& context) -> Result<std::unique_ptr<Task>> {
    auto task = make(options, context);
    if (!task) return task.status();
    return std::unique_ptr<Task>(std::move(*task));
  });
}

Result<MlpOptions> read_mlp(ConfigReader model, ConfigReader data) {
  return read_mlp_options(std::move(model), std::move(data));
}

Result<std::unique_ptr<AlbertTask>> make_albert(const AlbertRecipe& recipe, const TaskContext& context) {
  return make_albert_task(recipe, context);
}

Result<std::unique_ptr<Task>> make_swav(const models::SwavTaskOptions& options, const TaskContext& context) {
  return models::make_swav_task(options, context);
}

bool test_tasks_enabled() {
  const char* flag = std::getenv("DEDLOC_TEST_TASKS");
  return flag != nullptr && std::string_view(flag) == "1";
}

const std::map<std::string, Reader>& readers() {
  static const std::map<std::string, Reader> all = [] {
    std::map<std::string, Reader> kinds = {
        {"albert", read_then_build<read_albert_recipe, make_albert>},
        {"mlp", read_then_build<read_mlp, make_mlp_task>},
        {"swav", read_then_build<models::read_swav_options, make_swav>},
        {std::string(kSyntheticTaskKind), read_then_build<read_synthetic_options, make_synthetic_task>},
        {std::string(kTorchScriptTaskKind), read_then_build<read_torchscript_options, make_torchscript_task>},
    };
    if (test_tasks_enabled()) {
      kinds.emplace(std::string(kFailingTaskKind), read_then_build<read_failing_task_options, make_failing_task>);
    }
    return kinds;
  }();
  return all;
}

}  // namespace

bool has_task_kind(const std::string& kind) { return readers().count(kind) > 0; }

std::string known_task_kinds() {
  std::string out;
  for (const auto& [kind, reader] : readers()) out += (out.empty() ? "" : ", ") + kind;
  return out;
}

Result<TaskBuilder> read_task(const std::string& kind, ConfigReader model, ConfigReader data) {
  auto it = readers().find(kind);
  if (it == readers().end()) return error(Code::kInvalidArgument, "unknown model kind '" + kind + "' (one of " + known_task_kinds() + ")");
  return it->second(std::move(model), std::move(data));
}

}  // namespace dedloc::train
