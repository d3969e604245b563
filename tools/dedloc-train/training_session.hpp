// One dedloc-train session: load the recipe, join the DHT, build the task and optimizer, resume or catch up,
// train until stopped, leave cleanly.
#pragma once

#include <string>
#include <vector>

#include "dedloc/cli/app.hpp"

namespace dedloc::train_tool {

struct SessionOptions {
  std::string recipe;
  std::vector<std::string> initial_peers;
  std::string run_id;
  bool client_mode = false;
  std::vector<std::string> relays;  // --relay (client mode)
  std::string device = "cpu";
  std::int64_t micro_batch_size = 0;  // 0: the recipe's
  double max_time = 0;
  std::uint64_t max_epochs = 0;
  size_t min_peers = 1;
  std::string checkpoint_dir;
  bool resume = false;
  std::string dht_listen = "tcp://0.0.0.0:0";
  std::string avg_listen = "tcp://0.0.0.0:0";
  std::string announce_host;
  double bandwidth_mbit = 0;          // 0: the recipe's
  std::uint64_t data_seed = 0;        // 0: random
  int threads = 0;                    // 0: torch's default, or 1 for the synthetic task (it computes nothing)
  double compute_rate = 0;            // samples/s the synthetic task emulates; 0: the recipe's
  std::string samples_log;
  bool params_hash = false;           // "params_hash" in the --json step and download lines
};

int run_session(const cli::CommonFlags& common, const SessionOptions& options);

}  // namespace dedloc::train_tool
