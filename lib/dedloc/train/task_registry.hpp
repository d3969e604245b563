// Which tasks a recipe's model.kind can name, and how each is built.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dedloc/train/task.hpp"

namespace dedloc::train {

bool has_task_kind(const std::string& kind);
std::string known_task_kinds();  // "albert, mlp, swav" for messages
// Reports the recipe's unknown keys (ConfigReader::finish on its root).
using CheckRecipeKeys = std::function<Status()>;

// Builds the task of `kind` from its recipe sections. `check_keys` runs once the task has read its
// sections and before anything slow (a task that tokenizes a corpus does so after it), so a typo costs
// nothing.
Result<std::unique_ptr<Task>> make_task(const std::string& kind, ConfigReader model, ConfigReader data,
                                        const TaskContext& context, const CheckRecipeKeys& check_keys);

}  // namespace dedloc::train
