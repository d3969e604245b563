// dedloc-avg: the roles without a model: the CPU-only auxiliary peer, the monitor, the
// checkpoint export, and a benchmark of the network's averaging.
#include <vector>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace dedloc;
  cli::CommonFlags common;
  CLI::App app{"dedloc-avg: the peers of a run that hold no model. `aux` lends a CPU-only machine's bandwidth to "
               "a run's averaging rounds; `monitor` shows a run (dashboard, Prometheus /metrics, history); `export` "
               "saves its newest state as a checkpoint (for cron); `bench` times butterfly all-reduce rounds among "
               "local peer processes (testing the network and codecs, no training).",
               "dedloc-avg"};
  app.require_subcommand(1);
  app.fallthrough();
  cli::add_common_flags(app, common);

  std::vector<std::unique_ptr<avg_tool::Command>> commands;
  commands.push_back(avg_tool::make_aux_command());
  commands.push_back(avg_tool::make_bench_command());
  commands.push_back(avg_tool::make_monitor_command());
  commands.push_back(avg_tool::make_export_command());
  std::vector<CLI::App*> subcommands;
  for (auto& command : commands) subcommands.push_back(command->add_to(app));

  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, Logger::global()); !status.is_ok()) {
    return cli::report_failure("dedloc-avg", status);
  }
  if (!common.config.empty() || common.print_config) {
    // Said plainly rather than ignored: the subcommands take flags only for now.
    return cli::report_failure("dedloc-avg", error(Code::kInvalidArgument,
                                                   "--config/--print-config: dedloc-avg takes its settings as flags only"));
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    if (*subcommands[i]) return commands[i]->run(common);
  }
  return cli::kExitUsage;
}
