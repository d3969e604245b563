// dedloc-lab's subcommands: each adds its flags to the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

#include "dedloc/lab/lab_network.hpp"

namespace dedloc::lab_tool {

struct UpOptions {
  size_t hosts = 2;
  std::string rtt = "0", jitter = "0", rate = "0", upload, download, loss = "0", queue = "0";
  int mtu = 65000;
  std::string congestion_control = dedloc::lab::kDefaultCongestionControl;
  std::uint64_t seed = 1;
  bool json = false;
};

void add_up_flags(CLI::App& up, UpOptions& options);
int run_up(const UpOptions& options);

struct RunOptions {
  std::string scenario, duration, work_dir, report, peer_log_level;
  bool json = false;
};

void add_run_flags(CLI::App& run, RunOptions& options);
int run_run(const RunOptions& options);

}  // namespace dedloc::lab_tool
