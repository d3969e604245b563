// An aux peer is in the trainers' groups round after round, with real processes: three dedloc-train peers
// on the synthetic task and one `dedloc-avg aux`. Nobody waits for an aux peer (a group forms once its
// expected trainers are in), so it must be looking when the trainers start, for their round, not for the one
// it just reduced, and not long before them (collab/aux_timing.hpp; its rules are unit-tested in
// tests/unit/collab/aux_timing_test.cpp). Here a batch takes about as long to compute as the matchmaking
// time, as in bench/lab's paper scenarios, and the aux peer times its search from the trainers' records
// and the batch size their metrics records give: an aux peer that waited too long, or looked for the wrong
// round, would be missing from the groups. Then the same swarm with its aux peer SIGKILLed in a group.
#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;
using dedloc::test::pump_until;

namespace {

constexpr size_t kTrainers = 3;
constexpr std::uint64_t kEpochs = 10;

std::string recipe() {
  // 3 peers × 40 samples/s gather 240 samples in 2 s, the matchmaking time.
  return dedloc::test::write_recipe_variant(
      "recipes/synthetic.yaml", dedloc::test::make_temp_dir("dedloc-aux-rounds"), "aux.yaml",
      {{"parameters: 1000000 ", "parameters: 100000 "},
       {"target_batch_size: 512 ", "target_batch_size: 240 "},
       {"micro_batch_size: 16 ", "micro_batch_size: 8 "}});
}

// kTrainers synthetic trainers ("a", "b", ...) at 40 samples/s each, with data seeds 1, 2, ..., to run
// `epochs` epochs through the DHT node at `address`; `extra` flags for each.
std::vector<TrainerProcess> start_trainers(const std::string& recipe, const std::string& address, std::uint64_t epochs,
                                           const std::vector<std::string>& extra = {}) {
  std::vector<TrainerProcess> trainers;
  for (size_t i = 0; i < kTrainers; ++i) {
    TrainerArgs args{.recipe = recipe, .initial_peer = address, .data_seed = i + 1, .max_epochs = epochs,
                     .max_time = 120, .min_peers = kTrainers, .extra = {"--compute-rate", "40"}};
    args.extra.insert(args.extra.end(), extra.begin(), extra.end());
    auto trainer = TrainerProcess::start(std::string(1, static_cast<char>('a' + i)), args);
    REQUIRE(trainer.has_value());
    trainers.push_back(std::move(*trainer));
  }
  return trainers;
}

bool every_trainer_at(const std::vector<TrainerProcess>& trainers, std::uint64_t epoch) {
  return std::all_of(trainers.begin(), trainers.end(), [&](const TrainerProcess& t) { return t.epoch() >= epoch; });
}

}  // namespace

TEST_CASE("An aux peer reduces in the trainers' group round after round", "[proc][train][aux]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  const std::string path = recipe();
  auto [aux, aux_ready] = dedloc::test::start_ready(
      {dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"), "--log-level", "warning", "aux", "--run", "synthetic",
       "--initial-peers", address, "--listen", "tcp://127.0.0.1:0", "--target-group-size", "16",
       "--matchmaking-time", "2"});
  CHECK(aux_ready["role"] == "aux");
  std::vector<TrainerProcess> trainers = start_trainers(path, address, kEpochs);
  std::vector<TrainerProcess*> all;
  for (auto& t : trainers) all.push_back(&t);
  REQUIRE(pump_until(all, 150s, [&] { return every_trainer_at(trainers, kEpochs); }));
  for (auto& t : trainers) {
    CHECK(t.process().wait(30s) == 0);
    t.pump(100ms);
  }
  // The steps after the first (the peers start a moment apart), as the first trainer saw them.
  size_t steps = 0;
  size_t with_aux = 0;
  std::vector<int> sizes;
  for (const auto& s : trainers[0].steps()) {
    if (s["event"] != "averaged" || s["epoch"].get<std::uint64_t>() < 2) continue;
    ++steps;
    sizes.push_back(s["group_size"].get<int>());
    with_aux += s["group_size"].get<size_t>() == kTrainers + 1;
  }
  INFO("group sizes, epoch 2 on: " << Catch::Detail::stringify(sizes));
  REQUIRE(steps >= kEpochs - 3);
  // All but one or two rounds have the aux peer (one may form while it is between two reads of the records).
  CHECK(with_aux + 2 >= steps);
}

namespace {

// The number of lines of `path` that contain `text` (0 while the file does not exist).
size_t lines_containing(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  size_t count = 0;
  for (std::string line; std::getline(in, line);) count += line.find(text) != std::string::npos;
  return count;
}

}  // namespace

// A reducer that fails every member alike (here an aux peer SIGKILLed while the trainers' group held it)
// leaves the same parts of everyone's vector unaveraged. Each trainer stepping on its own gradients there
// would leave the round on a model of its own (with these data seeds, every peer's gradient differs), and
// three peers on three hashes have no majority to resync to. The trainers zero those parts instead
// (AllReduceResult::unaveraged, Trainer::run_gradient_round): the step leaves the aux peer's share out on
// every member, and they stay one model.
TEST_CASE("SIGKILL an aux peer in the trainers' group: their step leaves its share out alike, and they hold one model",
          "[proc][train][aux]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string address = ready["endpoints"][0].get<std::string>();
  const std::string path = recipe();
  const std::string aux_log = dedloc::test::make_temp_dir("dedloc-aux-killed") + "/aux.err";
  // Its debug lines say when it starts looking for a round's group. Its link, slower than the trainers',
  // gives it a part of the vector only (at theirs, the planner would give it all).
  auto [aux, aux_ready] = dedloc::test::start_ready(
      {"/bin/sh", "-c",
       "exec \"$0\" --log-level debug aux --run synthetic --initial-peers \"$1\" --listen tcp://127.0.0.1:0 "
       "--target-group-size 16 --matchmaking-time 2 --bandwidth 20 2> \"$2\"",
       dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"), address, aux_log});
  CHECK(aux_ready["role"] == "aux");
  std::vector<TrainerProcess> trainers = start_trainers(path, address, 7, {"--params-hash"});
  std::vector<TrainerProcess*> all;
  for (auto& t : trainers) all.push_back(&t);
  REQUIRE(pump_until(all, 90s, [&] { return every_trainer_at(trainers, 3); }));
  // Killed half a second into its next search: by then its join is held by the trainers' leader (their
  // group forms when their batch is complete, two seconds after their step), which lists it in the group.
  const std::string looking = "looking for a group under";
  const size_t searches = lines_containing(aux_log, looking);
  REQUIRE(pump_until(all, 30s, [&] { return lines_containing(aux_log, looking) > searches; }));
  pump_until(all, 500ms, [] { return false; });  // half a second of the trainers' lines
  aux.kill(SIGKILL);
  REQUIRE(pump_until(all, 90s, [&] { return every_trainer_at(trainers, 7); }));
  for (auto& t : trainers) {
    CHECK(t.process().wait(30s) == 0);
    t.pump(100ms);
  }

  // Per epoch: the trainers' step lines that averaged in the same group must carry one parameter hash,
  // whether all of the vector came back averaged or not.
  std::map<std::uint64_t, std::map<std::string, std::vector<nlohmann::json>>> groups;  // epoch → group → steps
  for (const auto& t : trainers) {
    for (const auto& s : t.steps()) {
      if (s["event"] == "averaged") groups[s["epoch"].get<std::uint64_t>()][s["group"].get<std::string>()].push_back(s);
    }
  }
  size_t partial_rounds = 0;
  for (const auto& [epoch, by_group] : groups) {
    for (const auto& [group, steps] : by_group) {
      std::string lines;
      for (const auto& s : steps) lines += "\n  " + s.dump();
      INFO("epoch " << epoch << ", group " << group << ":" << lines);
      for (const auto& s : steps) CHECK(s["params_hash"] == steps.front()["params_hash"]);
      const bool partial = std::all_of(steps.begin(), steps.end(), [](const nlohmann::json& s) {
        return s["averaged_fraction"].get<double>() < 1 && s["averaged_fraction"].get<double>() > 0;
      });
      partial_rounds += partial && steps.size() == kTrainers;
    }
  }
  // The round the aux peer died in: every trainer lost its share, and stepped without it.
  std::string steps;
  for (const auto& t : trainers) {
    for (const auto& s : t.steps()) steps += "\n  " + t.name() + ": " + s.dump();
  }
  INFO("the trainers' steps:" << steps);
  CHECK(partial_rounds >= 1);
}
