// Which tasks a recipe's model.kind can name, and how each is read and built.
//
// Reading and building are apart so that a recipe is checked whole (every key, errors naming the file)
// before anything slow or networked happens: Recipe::load reads the task's sections with read_task and
// reports unknown keys; the returned builder builds the model later (a task that tokenizes a corpus does
// so then).
//
// Test-only kinds: with DEDLOC_TEST_TASKS=1 in the environment, recipes may also name the tasks that
// exist to provoke failures in tests (models/failing_task.hpp). Without it they are unknown kinds.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dedloc/train/task.hpp"

namespace dedloc::train {

bool has_task_kind(const std::string& kind);
std::string known_task_kinds();  // "albert, mlp, swav" for messages

// Builds a task whose recipe sections were read and checked.
using TaskBuilder = std::function<Result<std::unique_ptr<Task>>(const TaskContext&)>;

// Reads and checks the task's recipe sections for `kind` (model: and data:); errors name the key and file.
Result<TaskBuilder> read_task(const std::string& kind, ConfigReader model, ConfigReader data);

}  // namespace dedloc::train
