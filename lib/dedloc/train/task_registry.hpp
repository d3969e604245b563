// Which tasks a recipe's model.kind can name, and how each is built.
#pragma once

#include <memory>
#include <string>

#include "dedloc/train/task.hpp"

namespace dedloc::train {

bool has_task_kind(const std::string& kind);
std::string known_task_kinds();  // "mlp, albert, swav" for messages
// Builds the task of `kind` from its recipe sections.
Result<std::unique_ptr<Task>> make_task(const std::string& kind, ConfigReader model, ConfigReader data,
                                        const TaskContext& context);

}  // namespace dedloc::train
