// What a scenario run measured, from the programs' --json lines (timestamped as they arrived) and the
// emulator's counters, over the measured window (after the warm-up):
//   global_steps_per_s   distinct global epochs the swarm reached in the window, per second
//   samples_per_s        samples in the steps every trainer reported, per second
//   averaged_fraction    of the trainers' step reports, those whose gradients were averaged with others
//   bytes_per_step       per peer (median over a group): bytes it sent, per global step
//   utilization          per group (median): bytes sent / (upload rate × window), received likewise
//   hosts                the same per host (the infrastructure included)
//   joiners              each (re)started trainer: seconds to its state download and to its first
//                        averaged step
//   predicted_steps_per_s, measured_over_predicted: the planner's prediction for the same peers (what
//                        dedloc-plan prints for them)
//   rss_mib, cpu_share   per group (median) at the end: resident memory, CPU over the window / cores
//   peak_rss_mib         per group (max) and host: the peak resident memory (VmHWM) of the process running at
//                        the end
//   averaged_samples_per_s  samples in averaged steps only, per second (goodput)
//   nonfinite_losses     step reports whose loss was not finite (written as null)
//   longest_round_over_deadline  the longest all-reduce as a multiple of its deadline (> 1: a wait past it)
//   longest_wait_s       the longest time between two step or download lines of one peer (one process life)
//   state_downloads      downloads, donors used, the most one donor served, the median download time
//   one_model            from the parameter hashes in the step lines: of the epochs two or more trainers
//                        stepped to, those where all of them hold one hash, and the share of step reports
//                        on their epoch's most common hash (the swarm trains one model, not several)
//   waves                per group with join_at: the same for its joiners, and their median time to the
//                        state and to an averaged step
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dedloc/lab/emulator.hpp"
#include "dedloc/lab/lab_processes.hpp"
#include "dedloc/lab/scenario.hpp"

namespace dedloc::lab {

struct HostRecord {
  std::string name;       // dht-0, relay-1, home-3
  int group = -1;         // index into Scenario::groups; -1 for the infrastructure
  size_t process = 0;     // index into the run's processes
  LinkSpec link;
  double rss_mib = 0;     // at the end
  double peak_rss_mib = 0;  // the most it was resident, over the life of the process running at the end
  double cpu_seconds = 0; // in the measured window (0 if its process was restarted in it)
};

struct RunRecord {
  const Scenario* scenario = nullptr;
  std::vector<HostRecord> hosts;
  std::vector<OutputLine> lines;
  std::vector<std::vector<TimePoint>> starts;  // per process: every time it was started
  EmulatorStats at_warmup, at_end;
  TimePoint start{}, warm{}, end{};
  double predicted_steps_per_second = 0;  // 0: unknown
  // The planner's steps without overlap (plan::StepPrediction::synchronous_steps_per_second), for a recipe whose
  // collaboration.mode is synchronous: what its runs, computing then averaging, can reach. 0: not such a run.
  double predicted_synchronous_steps_per_second = 0;
  std::string prediction_note;
};

nlohmann::json build_report(const RunRecord& run);

// The report in a few lines for people.
std::string describe_report(const nlohmann::json& report);

}  // namespace dedloc::lab
