// dedloc-lab: the internet on one machine (docs/lab.md). `up` makes lab hosts (network namespaces) joined
// by the user-space link emulator; `run` runs a scenario of a whole collaboration there; `clean` removes
// what a killed lab left behind.
#include "commands.hpp"
#include "dedloc/cli/app.hpp"
#include "dedloc/lab/lab_network.hpp"

int main(int argc, char** argv) {
  using namespace dedloc;
  cli::CommonFlags common;
  CLI::App app{"dedloc-lab: emulated internet links on one machine (root). Each lab host is a network namespace "
               "whose only link goes through a user-space emulator that delays, rate-limits, queues and drops "
               "packets per host and direction, and keeps hosts behind NAT unreachable from outside.",
               "dedloc-lab"};
  app.require_subcommand(1);
  app.fallthrough();  // the common flags may follow the subcommand: dedloc-lab up --json
  cli::add_common_flags(app, common, {.json = true});

  lab_tool::UpOptions up_options;
  CLI::App* up = app.add_subcommand(
      "up", "Creates --hosts lab hosts joined by emulated links, prints one JSON ready line (each host's namespace "
            "and address), forwards until SIGINT/SIGTERM, then removes the hosts (killing what runs in them) and "
            "prints the emulator's counters. Run a command in a host: ip netns exec NETNS COMMAND.");
  lab_tool::add_up_flags(*up, up_options);
  lab_tool::RunOptions run_options;
  CLI::App* run = app.add_subcommand(
      "run", "Runs a scenario: a DHT bootstrap node, relays and peers (dedloc-train, dedloc-avg aux) in lab hosts on "
             "the scenario's links, with its faults on time; prints the report (steps/s, samples/s, averaged share, "
             "bytes per step, link use, joiners' catch-up, the planner's prediction).");
  lab_tool::add_run_flags(*run, run_options);
  CLI::App* clean = app.add_subcommand("clean", "Removes the namespaces of lab runs whose process is gone.");

  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, Logger::global()); !status.is_ok()) {
    return cli::report_failure("dedloc-lab", status);
  }
  if (*clean) {
    lab::LabNetwork::remove_leftovers();
    return cli::kExitOk;
  }
  if (*run) {
    run_options.json = common.json;
    return lab_tool::run_run(run_options);
  }
  up_options.json = common.json;
  return lab_tool::run_up(up_options);
}
