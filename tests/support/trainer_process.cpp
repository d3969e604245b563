#include "support/trainer_process.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "support/test_paths.hpp"

namespace dedloc::test {

using nlohmann::json;

namespace {

// $DEDLOC_TEST_TRAINER_LOG (e.g. info) makes the trainers' logs visible when a test needs looking into.
std::string log_level() {
  const char* level = std::getenv("DEDLOC_TEST_TRAINER_LOG");
  return level && *level ? level : "warning";
}

}  // namespace

std::vector<std::string> trainer_command(const TrainerArgs& args) {
  const std::string recipe = args.recipe.starts_with("/") ? args.recipe : source_path(args.recipe);
  std::vector<std::string> argv = args.launcher;
  const std::string any_port = "tcp://" + args.host + ":0";
  argv.insert(argv.end(), {binary_path("tools/dedloc-train/dedloc-train"), "--recipe", recipe,
                                "--listen", any_port, "--avg-listen", any_port,
                                "--threads", "1", "--data-seed", std::to_string(args.data_seed),
                                "--min-peers", std::to_string(args.min_peers), "--json", "--log-level", log_level()});
  if (!args.initial_peer.empty()) argv.insert(argv.end(), {"--initial-peers", args.initial_peer});
  if (!args.run_id.empty()) argv.insert(argv.end(), {"--run-id", args.run_id});
  if (args.max_epochs > 0) argv.insert(argv.end(), {"--max-epochs", std::to_string(args.max_epochs)});
  if (args.max_time > 0) argv.insert(argv.end(), {"--max-time", std::to_string(args.max_time)});
  if (!args.checkpoint_dir.empty()) argv.insert(argv.end(), {"--checkpoint-dir", args.checkpoint_dir});
  argv.insert(argv.end(), args.extra.begin(), args.extra.end());
  return argv;
}

std::optional<TrainerProcess> TrainerProcess::start(const std::string& name, const TrainerArgs& args) {
  TrainerProcess trainer(name, ChildProcess::spawn(trainer_command(args)));
  bool ready = false;
  while (!ready) {
    // A joining peer downloads the state first (its own deadline: 120 s, with a dead donor to skip).
    auto text = trainer.process_.read_line(std::chrono::seconds(150));
    if (!text) return std::nullopt;
    auto line = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded()) continue;  // not ours: the test fails on what is missing, not on noise
    if (line.value("ready", false)) {
      ready = true;
      trainer.peer_id_ = line.value("peer_id", "");
      // A client-mode peer has no DHT endpoint to give.
      if (!line["endpoints"].empty()) trainer.address_ = line["endpoints"][0].get<std::string>();
    } else {
      trainer.events_.push_back(std::move(line));
    }
  }
  return trainer;
}

void TrainerProcess::pump(Duration wait) {
  while (auto text = process_.read_line(wait)) {
    auto line = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (!line.is_discarded()) events_.push_back(std::move(line));
    wait = std::chrono::milliseconds(1);
  }
}

std::uint64_t TrainerProcess::epoch() const {
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (it->contains("epoch")) return (*it)["epoch"].get<std::uint64_t>();
  }
  return 0;
}

std::vector<json> TrainerProcess::steps() const {
  std::vector<json> out;
  for (const auto& e : events_) {
    auto kind = e.value("event", "");
    if (kind == "averaged" || kind == "alone" || kind == "local" || kind == "skipped") out.push_back(e);
  }
  return out;
}

size_t TrainerProcess::averaged_rounds() const {
  size_t n = 0;
  for (const auto& e : events_) n += e.value("event", "") == "averaged";
  return n;
}

std::optional<json> TrainerProcess::find(const std::string& event) const {
  for (const auto& e : events_) {
    if (e.value("event", "") == event) return e;
  }
  return std::nullopt;
}

std::string write_recipe_variant(const std::string& base, const std::string& dir, const std::string& name,
                                 const std::vector<std::pair<std::string, std::string>>& replacements) {
  std::ifstream in(source_path(base));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& [from, to] : replacements) {
    auto at = text.find(from);
    if (at == std::string::npos) throw std::runtime_error(base + " has no '" + from + "' to replace");
    text.replace(at, from.size(), to);
  }
  const std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::vector<std::pair<json, json>> steps_averaged_together(const TrainerProcess& x, const TrainerProcess& y) {
  std::vector<std::pair<json, json>> pairs;
  for (const auto& s : x.steps()) {
    if (s["event"] != "averaged" || s.value("averaged_fraction", 0.0) < 1) continue;
    for (const auto& t : y.steps()) {
      if (t["event"] == "averaged" && t["epoch"] == s["epoch"] && t.value("group", "") == s.value("group", "")) {
        pairs.emplace_back(s, t);
      }
    }
  }
  return pairs;
}

std::optional<double> mean_loss(const std::vector<json>& steps, std::uint64_t first, std::uint64_t last) {
  double sum = 0;
  int n = 0;
  for (const auto& s : steps) {
    auto epoch = s["epoch"].get<std::uint64_t>();
    if (epoch >= first && epoch <= last) {
      sum += s["loss"].get<double>();
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

std::vector<TrainerProcess> run_synthetic_peers(const std::string& recipe, const std::string& initial_peer,
                                                const std::vector<SyntheticPeer>& peers, std::uint64_t max_epochs,
                                                double max_time, Duration timeout, std::string& why_not) {
  std::vector<TrainerProcess> trainers;
  for (const auto& peer : peers) {
    TrainerArgs args{.recipe = recipe, .initial_peer = initial_peer, .data_seed = peer.data_seed,
                     .max_epochs = max_epochs, .max_time = max_time, .min_peers = peers.size(),
                     .extra = {"--params-hash", "--compute-rate", std::to_string(peer.compute_rate)}};
    const std::string name = "peer" + std::to_string(peer.data_seed);
    auto trainer = TrainerProcess::start(name, args);
    if (!trainer) {
      why_not = name + " did not start";
      return {};
    }
    trainers.push_back(std::move(*trainer));
  }
  std::vector<TrainerProcess*> all;
  for (auto& t : trainers) all.push_back(&t);
  const bool exited = pump_until(all, timeout, [&] {
    return std::all_of(all.begin(), all.end(), [](TrainerProcess* t) { return t->find("exit").has_value(); });
  });
  if (!exited) why_not = "not every peer exited within the timeout";
  for (auto* t : all) {
    if (t->process().wait(std::chrono::seconds(10)) != 0 && why_not.empty()) why_not = t->name() + " exited with an error";
  }
  return trainers;
}

}  // namespace dedloc::test
