// A task for tests only: recipes/mlp.yaml's MLP whose loss throws what libtorch throws when a device runs
// out of memory (or another libtorch error, or a plain std::exception) after a number of micro-batches.
// It shows that such an error ends dedloc-train with one error line, a documented exit code and the
// peer's records withdrawn (tests/proc/train_cli_test.cpp), which no real CPU run can provoke on demand.
//
// Recipes can name it only when the environment has DEDLOC_TEST_TASKS=1 (task_registry.cpp): it is not
// a model anybody trains.
//
// Recipe keys. model: kind (test-failing-mlp), fail_after (micro-batches computed before the loss throws,
//                     40), error (out_of_memory, libtorch or std), and the mlp's keys.
//              data:  the mlp's (kind regression, ...).
#pragma once

#include "dedloc/train/models/mlp_task.hpp"

namespace dedloc::train {

inline constexpr std::string_view kFailingTaskKind = "test-failing-mlp";

struct FailingTaskOptions {
  enum class Error { kOutOfMemory, kLibtorch, kStd };
  MlpOptions mlp;
  std::uint64_t fail_after = 40;
  Error error = Error::kOutOfMemory;
};

Result<FailingTaskOptions> read_failing_task_options(ConfigReader model, ConfigReader data);
Result<std::unique_ptr<Task>> make_failing_task(const FailingTaskOptions& options, const TaskContext& context);

}  // namespace dedloc::train
