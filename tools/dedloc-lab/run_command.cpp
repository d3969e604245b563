// dedloc-lab run SCENARIO: a whole collaboration in the lab (docs/lab.md, "Scenarios").
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "dedloc/cli/app.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/lab/scenario_report.hpp"
#include "dedloc/lab/scenario_runner.hpp"

namespace dedloc::lab_tool {

namespace {

// The build's tools directory: this program is tools/dedloc-lab/dedloc-lab in it.
std::string tools_dir_of_this_program() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("build/tools") : self.parent_path().parent_path().string();
}

}  // namespace

void add_run_flags(CLI::App& run, RunOptions& o) {
  run.add_option("scenario", o.scenario, "the scenario file (YAML; docs/lab.md, scenarios in bench/lab/scenarios/)")
      ->required();
  run.add_option("--duration", o.duration, "override the scenario's duration, e.g. 60s");
  run.add_option("--work-dir", o.work_dir,
                 "where each program's stderr, the timestamped output lines and the report go (default: a new "
                 "directory under /tmp, printed)");
  run.add_option("--report", o.report, "also write the JSON report to this file (atomically)");
  run.add_option("--peer-log-level", o.peer_log_level,
                 "every peer's --log-level (debug adds matchmaking, DHT and RPC detail); their logs are NAME.err in "
                 "the work directory")
      ->check(CLI::IsMember({"debug", "info", "warning", "error", "off"}));
}

int run_run(const RunOptions& o) {
  constexpr std::string_view kTool = "dedloc-lab run";
  auto scenario = lab::load_scenario(o.scenario);
  if (!scenario) return cli::report_failure(kTool, scenario.status()), cli::kExitConfig;
  if (!o.duration.empty()) {
    auto duration = lab::parse_duration(o.duration, "--duration");
    if (!duration) return cli::report_failure(kTool, duration.status()), cli::kExitUsage;
    scenario->duration = *duration;
    scenario->warmup = std::min(scenario->warmup, *duration / 3);
  }
  std::string work_dir = o.work_dir;
  if (work_dir.empty()) {
    char pattern[] = "/tmp/dedloc-lab-run-XXXXXX";
    if (!::mkdtemp(pattern)) return cli::report_failure(kTool, error(Code::kIo, "cannot make a work directory")), cli::kExitFailure;
    work_dir = pattern;
  }
  std::filesystem::create_directories(work_dir);
  std::cerr << "dedloc-lab: work directory " << work_dir << std::endl;
  cli::install_shutdown_handlers();
  lab::RunnerOptions options{tools_dir_of_this_program(), work_dir,
                             [](const std::string& line) { std::cerr << "dedloc-lab: " << line << std::endl; },
                             o.peer_log_level};
  auto report = lab::run_scenario(*scenario, options, [] { return cli::shutdown_requested(); });
  if (!report) {
    cli::report_failure(kTool, report.status());
    return report.status().code() == Code::kCancelled ? cli::kExitInterrupted : cli::kExitUnavailable;
  }
  const std::string json = report->dump(2);
  (void)write_file_atomically(work_dir + "/report.json", json + "\n");
  if (!o.report.empty()) {
    if (auto written = write_file_atomically(o.report, json + "\n"); !written.is_ok()) {
      return cli::report_failure(kTool, written), cli::kExitFailure;
    }
  }
  if (o.json) std::cout << report->dump() << std::endl;
  else std::cout << lab::describe_report(*report) << std::flush;
  return cli::kExitOk;
}

}  // namespace dedloc::lab_tool
