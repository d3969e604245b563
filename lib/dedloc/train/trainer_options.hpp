// From a recipe and what a peer's command line changes to the trainer's options (docs/recipes.md): the
// mapping dedloc-train uses, here so that it is one library call and tests can make the same options.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/net/peer_address.hpp"
#include "dedloc/train/recipe.hpp"
#include "dedloc/train/trainer.hpp"

namespace dedloc::train {

// What a peer sets for itself, over the recipe (dedloc-train's flags). Zero or empty: the recipe's value
// or the default.
struct TrainerOverrides {
  std::string run_id;                    // empty: the recipe's run_id
  bool client_mode = false;              // behind NAT: send gradients, reduce nothing, serve through a relay
  std::vector<net::PeerAddress> relays;  // client mode: relays to try before those listed in the DHT
  std::string avg_listen = "tcp://0.0.0.0:0";
  std::string avg_announce;              // what others dial for the averaging server; empty: the bound endpoint
  double bandwidth_mbit = 0;             // Mbit/s each way; 0: the recipe's
  std::int64_t micro_batch_size = 0;     // 0: the recipe's
  double max_time_seconds = 0;           // 0: no limit
  std::uint64_t max_epochs = 0;          // 0: no limit
  size_t min_peers = 1;
  std::string checkpoint_dir;            // empty: no checkpoints
  std::string samples_log;               // empty: none
  bool status_line = false;
};

// The trainer's options: the recipe's training, schedule and averaging sections, with the overrides on
// top. Fails only when neither the recipe nor the overrides name a run.
// Left for the caller: on_event and log.
Result<TrainerOptions> trainer_options(const Recipe& recipe, const TrainerOverrides& overrides);

// What the recipe's task is built with: the recipe's init seed, the micro-batch size the options say, and
// `work_dir` (created) for what the task caches.
TaskContext task_context(const Recipe& recipe, const TrainerOptions& options, torch::Device device,
                         std::uint64_t data_seed, const std::string& work_dir);

}  // namespace dedloc::train
