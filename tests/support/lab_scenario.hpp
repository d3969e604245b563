// Running a shipped lab scenario (bench/lab/scenarios/) with `dedloc-lab run --json`, for the tests that hold
// a whole collaboration in the lab to its report (docs/lab.md). A machine without root or /dev/net/tun
// skips the test loudly (support/skip.hpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/lab/lab_network.hpp"
#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/test_paths.hpp"

namespace dedloc::test {

struct LabScenarioRun {
  int exit_code = -1;
  std::string output;     // everything dedloc-lab printed
  nlohmann::json report;  // its last line, the report (null when there is none)
};

// `scenario`: a file name under bench/lab/scenarios/; `flags`: more flags for `dedloc-lab run`.
inline LabScenarioRun run_lab_scenario(const std::string& scenario, const std::string& flags = "") {
  if (auto probe = lab::LabNetwork::create(1); !probe) skip_test("the lab cannot run here: " + probe.status().to_string());
  auto run = run_command("'" + binary_path("tools/dedloc-lab/dedloc-lab") + "' run '" +
                         source_path("bench/lab/scenarios/" + scenario) + "' " + flags + " --json 2>&1");
  LabScenarioRun result{run.exit_code, run.output, nullptr};
  const size_t last = run.output.rfind("\n{");
  if (last != std::string::npos) result.report = nlohmann::json::parse(run.output.substr(last + 1), nullptr, false);
  return result;
}

}  // namespace dedloc::test
