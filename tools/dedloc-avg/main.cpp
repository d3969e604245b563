// dedloc-avg: the roles without a model: the CPU-only auxiliary peer, the monitor, the
// checkpoint export, and a benchmark of the network's averaging.
#include <memory>

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

  // Each subcommand with the common flags it honours. The tool offers their union, so that they may come
  // before the subcommand too (`dedloc-avg --identity aux.key aux ...`); none reads --config or
  // --print-config (the subcommands take flags only), so those are not offered.
  struct Subcommand {
    std::unique_ptr<avg_tool::Command> command;
    cli::HonouredFlags honours;
    CLI::App* app = nullptr;
  };
  const cli::HonouredFlags json{.json = true};
  Subcommand subcommands[] = {
      {avg_tool::make_aux_command(), cli::HonouredFlags::peer()},
      {avg_tool::make_bench_command(), {.plaintext = true, .json = true}},
      {avg_tool::make_monitor_command(), cli::HonouredFlags::peer() | json},
      {avg_tool::make_export_command(), cli::HonouredFlags::peer() | json},
  };
  cli::HonouredFlags offered;
  for (const auto& subcommand : subcommands) offered = offered | subcommand.honours;
  cli::add_common_flags(app, common, offered);
  for (auto& subcommand : subcommands) subcommand.app = subcommand.command->add_to(app);

  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, Logger::global()); !status.is_ok()) {
    return cli::report_failure("dedloc-avg", status);
  }
  for (auto& subcommand : subcommands) {
    if (!*subcommand.app) continue;
    if (auto refused = cli::refuse_unhonoured(app, subcommand.honours, subcommand.app->get_name()); !refused.is_ok()) {
      return cli::report_failure("dedloc-avg", refused);
    }
    return subcommand.command->run(common);
  }
  return cli::kExitUsage;
}
