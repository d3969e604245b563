// A dedloc-train process for proc tests, followed through its --json lines: the ready line, one line per
// global step or state download, and the exit line (docs/recipes.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace dedloc::test {

struct TrainerArgs {
  std::string recipe;              // an absolute path, or relative to the source tree
  std::string initial_peer;        // empty: this one starts the swarm
  std::string run_id;              // empty: the recipe's
  std::uint64_t data_seed = 1;
  std::uint64_t max_epochs = 0;
  double max_time = 0;
  size_t min_peers = 1;
  std::string checkpoint_dir;      // empty: none
  std::vector<std::string> extra;  // more flags
  std::vector<std::string> launcher;  // runs the trainer, e.g. {"/usr/sbin/ip", "netns", "exec", NS}
  std::string host = "127.0.0.1";     // the address its servers bind
};

// The dedloc-train command line for `args` (for a test that follows a peer that never gets to its ready line).
std::vector<std::string> trainer_command(const TrainerArgs& args);

class TrainerProcess {
 public:
  // Starts dedloc-train and reads up to its ready line (150 s at most; events a joining peer reports before
  // it, such as a state download, are kept). nullopt when it exits or says nothing in time.
  static std::optional<TrainerProcess> start(const std::string& name, const TrainerArgs& args);

  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }  // its DHT endpoint, for --initial-peers (empty in client mode)
  const std::string& peer_id() const { return peer_id_; }
  ChildProcess& process() { return process_; }

  // Reads the lines that arrive within `wait` (then without waiting).
  void pump(Duration wait);
  // The epoch of the latest step or download reported (0 before any).
  std::uint64_t epoch() const;
  // The step lines (event averaged, alone, local or skipped), in order.
  std::vector<nlohmann::json> steps() const;
  // How many of those steps averaged with others.
  size_t averaged_rounds() const;
  // The first line with this event, if any.
  std::optional<nlohmann::json> find(const std::string& event) const;
  const std::vector<nlohmann::json>& events() const { return events_; }

 private:
  TrainerProcess(std::string name, ChildProcess process) : name_(std::move(name)), process_(std::move(process)) {}
  std::string name_;
  ChildProcess process_;
  std::string address_;
  std::string peer_id_;
  std::vector<nlohmann::json> events_;
};

// Pumps every trainer until `done()` holds (true) or `timeout` passes (false).
template <typename Done>
bool pump_until(const std::vector<TrainerProcess*>& trainers, Duration timeout, Done done) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    for (auto* t : trainers) t->pump(std::chrono::milliseconds(20));
    if (done()) return true;
  }
  return false;
}

// Peers of the synthetic task (lib/dedloc/train/models/synthetic_task.hpp): each computes at its emulated
// rate (--compute-rate, samples/s), and its data seed sets its closed-form gradient.
struct SyntheticPeer {
  std::uint64_t data_seed;
  double compute_rate;
};

// Starts one dedloc-train per peer ("peer<seed>", with --params-hash) on `recipe`, joining through
// `initial_peer`, each to run `max_epochs` epochs (--max-time `max_time`, --min-peers all of them), and
// waits until every one has exited 0, at most `timeout`. Returns them then, or why not (empty: none started).
std::vector<TrainerProcess> run_synthetic_peers(const std::string& recipe, const std::string& initial_peer,
                                                const std::vector<SyntheticPeer>& peers, std::uint64_t max_epochs,
                                                double max_time, Duration timeout, std::string& why_not);

// Writes `dir`/`name`: the recipe at `base` (relative to the source tree) with each `from` text replaced by
// its `to` (each must occur); returns the path. Tests vary a shipped recipe this way.
std::string write_recipe_variant(const std::string& base, const std::string& dir, const std::string& name,
                                 const std::vector<std::pair<std::string, std::string>>& replacements);

// The pairs of step lines, one of `x`'s and one of `y`'s, of the steps they averaged in the same group with
// the whole vector back (averaged_fraction 1): where their parameters must be bit-identical afterwards
// (compare the lines' params_hash, with --params-hash).
std::vector<std::pair<nlohmann::json, nlohmann::json>> steps_averaged_together(const TrainerProcess& x,
                                                                              const TrainerProcess& y);

// The mean loss of the steps whose epoch is in [first, last]; nullopt when there are none.
std::optional<double> mean_loss(const std::vector<nlohmann::json>& steps, std::uint64_t first, std::uint64_t last);

}  // namespace dedloc::test
