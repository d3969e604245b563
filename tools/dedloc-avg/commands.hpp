// dedloc-avg's subcommands, one per file: each registers its flags on the app and runs when chosen.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "dedloc/cli/app.hpp"

namespace dedloc::avg_tool {

class Command {
 public:
  virtual ~Command() = default;
  // Adds the subcommand and its flags to `app`; returns it (main checks which one was chosen).
  virtual CLI::App* add_to(CLI::App& app) = 0;
  // Runs it; returns the process exit code (docs/operators.md).
  virtual int run(const cli::CommonFlags& common) = 0;
};

// `dedloc-avg bench`: averages a synthetic vector among N local peer processes, timing each round.
std::unique_ptr<Command> make_bench_command();
// `dedloc-avg aux`: a CPU-only peer that reduces shares of a run's averaging rounds.
std::unique_ptr<Command> make_aux_command();
// `dedloc-avg monitor`: a run's dashboard, /metrics and history.
std::unique_ptr<Command> make_monitor_command();
// `dedloc-avg export`: one checkpoint of a run's newest state (for cron).
std::unique_ptr<Command> make_export_command();

}  // namespace dedloc::avg_tool
